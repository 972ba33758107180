package canary

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSplitFor(t *testing.T) {
	cases := []struct {
		replicas, weight, surge int32
		want                    Split
	}{
		{10, 0, 3, Split{0, 10}},
		{10, 10, 3, Split{1, 9}},
		{10, 1, 3, Split{1, 10}}, // 1 of 11 is closer to 1% than 1 of 10
		{10, 1, 0, Split{1, 9}},  // never rounded away to zero
		{10, 99, 0, Split{9, 1}}, // nor the stable side
		{10, 50, 3, Split{5, 5}},
		{10, 100, 3, Split{10, 0}},
		{3, 50, 0, Split{2, 1}}, // a tie: the larger canary
		{3, 50, 1, Split{2, 2}}, // one surge replica makes it exact
		{4, 25, 1, Split{1, 3}},
		{5, 10, 2, Split{1, 5}}, // 1/6 is closer to 10% than 1/5
		{1, 50, 0, Split{1, 0}}, // one replica, no surge: no room for both
		{1, 20, 0, Split{0, 1}},
		{1, 20, 1, Split{1, 1}},
		{0, 50, 1, Split{}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d replicas at %d%% surge %d", c.replicas, c.weight, c.surge), func(t *testing.T) {
			assert.Equal(t, c.want, SplitFor(c.replicas, c.weight, c.surge))
		})
	}
}

func TestStep(t *testing.T) {
	type rs = ReplicaSet
	cases := []struct {
		name                     string
		replicas, surge, unavail int32
		canary, stable           rs
		want, next               Split
	}{
		{"a canary pod within the surge, a stable one within maxUnavailable", 10, 3, 2, rs{0, 0}, rs{10, 10}, Split{1, 9}, Split{1, 9}},
		{"the next weight: canary up by the surge, stable down by the spare", 10, 3, 2, rs{1, 1}, rs{9, 9}, Split{5, 5}, Split{4, 7}},
		{"no surge: the stable shrinks first", 10, 0, 2, rs{0, 0}, rs{10, 10}, Split{5, 5}, Split{0, 8}},
		{"no surge, then the canary grows into the room", 10, 0, 2, rs{0, 0}, rs{8, 8}, Split{5, 5}, Split{2, 8}},
		{"the stable waits while too few pods are available", 10, 0, 2, rs{2, 0}, rs{8, 8}, Split{5, 5}, Split{2, 8}},
		{"abort: the stable comes back up first", 4, 1, 0, rs{4, 4}, rs{0, 0}, Split{0, 4}, Split{4, 1}},
		{"abort: canary pods go as stable pods become available", 4, 1, 0, rs{4, 4}, rs{1, 1}, Split{0, 4}, Split{3, 1}},
		{"unavailable canary pods go at once", 10, 0, 0, rs{5, 0}, rs{5, 5}, Split{0, 10}, Split{0, 5}},
		{"at the split: nothing to do", 10, 3, 2, rs{5, 5}, rs{5, 5}, Split{5, 5}, Split{5, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.next, Step(c.replicas, c.surge, c.unavail, c.canary, c.stable, c.want))
		})
	}
}

// Found by make chaos: a canary without a fault fell to 3 available pods
// of 4 with maxUnavailable 0. The stable's status still counted a pod its
// last scale-down removed, and Step spent that pod a second time; counted
// (Counted), a stale status spares nothing.
func TestAStatusStaleAfterAScaleDownSparesNothing(t *testing.T) {
	canary, stable := ReplicaSet{Replicas: 2, Available: 1}, ReplicaSet{Replicas: 3, Available: 4}
	assert.Equal(t, Split{Canary: 2, Stable: 2}, Step(4, 1, 0, canary, stable, Split{2, 2}), "uncounted: the stale pod is spent")
	assert.Equal(t, Split{Canary: 2, Stable: 3}, Step(4, 1, 0, Counted(canary), Counted(stable), Split{2, 2}), "counted: the stable waits")
}

// Stepping through a canary's weights (and an abort back to 0) with pods
// becoming available between syncs reaches every split, never runs more
// than replicas+maxSurge pods, and never leaves fewer than
// replicas-maxUnavailable available.
func TestStepsReachEveryWeightWithinTheLimits(t *testing.T) {
	for _, c := range []struct{ replicas, surge, unavail int32 }{{10, 3, 2}, {10, 0, 1}, {10, 1, 0}, {4, 1, 0}, {3, 1, 1}, {1, 1, 0}} {
		t.Run(fmt.Sprintf("%d replicas, surge %d, unavailable %d", c.replicas, c.surge, c.unavail), func(t *testing.T) {
			canary, stable := ReplicaSet{}, ReplicaSet{Replicas: c.replicas, Available: c.replicas}
			for _, weight := range []int32{10, 50, 100, 0} {
				want := SplitFor(c.replicas, weight, c.surge)
				for sync := 0; canary.Replicas != want.Canary || stable.Replicas != want.Stable; sync++ {
					if !assert.Less(t, sync, 50, "weight %d: no progress from %+v %+v", weight, canary, stable) {
						return
					}
					next := Step(c.replicas, c.surge, c.unavail, canary, stable, want)
					assert.LessOrEqual(t, next.Canary+next.Stable, c.replicas+c.surge, "weight %d: pods", weight)
					// Pods removed go now; pods added become available by the next sync.
					canary.Available, stable.Available = min(canary.Available, next.Canary), min(stable.Available, next.Stable)
					assert.GreaterOrEqual(t, canary.Available+stable.Available, c.replicas-c.unavail, "weight %d: available", weight)
					canary = ReplicaSet{Replicas: next.Canary, Available: next.Canary}
					stable = ReplicaSet{Replicas: next.Stable, Available: next.Stable}
				}
			}
		})
	}
}

func TestScaleFor(t *testing.T) {
	n := func(v int32) *int32 { return &v }
	for _, c := range []struct {
		name          string
		replicas      int32
		count, weight *int32
		want          Split
	}{
		{"two replicas", 10, n(2), nil, Split{Canary: 2, Stable: 8}},
		{"no canary", 10, n(0), nil, Split{Stable: 10}},
		{"more than replicas is all of them", 4, n(9), nil, Split{Canary: 4}},
		{"a weight rounds up to a pod", 10, nil, n(1), Split{Canary: 1, Stable: 9}},
		{"half", 10, nil, n(50), Split{Canary: 5, Stable: 5}},
		{"all", 3, nil, n(100), Split{Canary: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ScaleFor(c.replicas, c.count, c.weight); got != c.want {
				t.Errorf("ScaleFor(%d, %v, %v) = %+v, want %+v", c.replicas, c.count, c.weight, got, c.want)
			}
		})
	}
}
