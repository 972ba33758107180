package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/deployflow/deployflow/internal/observe"
)

// rsWith is rsAt with status counts: replicas (pods created), ready and
// available.
func rsWith(name, rv string, spec, created, ready, available int32) *appsv1.ReplicaSet {
	rs := rsAt(name, rv, spec)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: created, ReadyReplicas: ready, AvailableReplicas: available}
	return rs
}

// cachingObserver is a worker's observer with its ReplicaSet cache.
type cachingObserver struct{ *fakeCache }

func (cachingObserver) Observe(context.Context, string) (*observe.Observation, bool) {
	return nil, false
}

func stateOf(rs ...*appsv1.ReplicaSet) *RolloutState {
	s := &snapshot{replicaSets: map[string]*appsv1.ReplicaSet{}}
	for _, r := range rs {
		s.replicaSets[r.Name] = r
	}
	return s.state()
}

// Which changes a quick wait lets pass: only pods created and not yet
// ready. Anything a decision reads (issue 22: the rollout's extra wait for
// a pod created, then another for it ready) ends it.
func TestOnlyPodsCreated(t *testing.T) {
	seen := stateOf(rsWith("new", "10", 2, 0, 0, 0), rsWith("old", "9", 1, 1, 1, 1))
	cases := []struct {
		name string
		now  *RolloutState
		want bool
	}{
		{"the new ReplicaSet's pods created", stateOf(rsWith("new", "11", 2, 2, 0, 0), rsWith("old", "9", 1, 1, 1, 1)), true},
		{"one of them ready", stateOf(rsWith("new", "12", 2, 2, 1, 0), rsWith("old", "9", 1, 1, 1, 1)), false},
		{"one of them available", stateOf(rsWith("new", "12", 2, 2, 1, 1), rsWith("old", "9", 1, 1, 1, 1)), false},
		{"an old pod gone", stateOf(rsWith("new", "11", 2, 2, 0, 0), rsWith("old", "10", 1, 0, 1, 1)), false},
		{"someone scaled the new one", stateOf(rsWith("new", "11", 3, 2, 0, 0), rsWith("old", "9", 1, 1, 1, 1)), false},
		{"a ReplicaSet appeared", stateOf(rsWith("new", "10", 2, 0, 0, 0), rsWith("old", "9", 1, 1, 1, 1), rsWith("x", "13", 1, 0, 0, 0)), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, onlyPodsCreated(seen, c.now))
		})
	}
	t.Run("Recreate's active pods: more is pods created, fewer is not", func(t *testing.T) {
		before := &RolloutState{ReplicaSets: seen.ReplicaSets, ActivePods: map[types.UID]int32{"old": 1}}
		more := &RolloutState{ReplicaSets: seen.ReplicaSets, ActivePods: map[types.UID]int32{"old": 1, "new": 1}}
		fewer := &RolloutState{ReplicaSets: seen.ReplicaSets, ActivePods: map[types.UID]int32{"new": 1}}
		assert.True(t, onlyPodsCreated(before, more))
		assert.False(t, onlyPodsCreated(before, fewer))
	})
}

// A quick wait wakes the rollout once for a pod created then ready, not
// twice, and says when it saw what it returns; a pod that never gets ready
// ends it at its bound, seen when it was created.
func TestQuickWait(t *testing.T) {
	seen := stateOf(rsWith("a", "10", 1, 0, 0, 0))
	in := WaitForChangeInput{ServiceRef: ServiceRef{Namespace: "ns", Service: "web"}, Seen: seen,
		Timeout: time.Minute, ResourceVersions: map[string]string{"a": "10"}}

	t.Run("created, then ready: one answer, the ready state", func(t *testing.T) {
		c := newFakeCache(rsWith("a", "10", 1, 0, 0, 0))
		readyAt := make(chan time.Time, 1)
		go func() {
			time.Sleep(50 * time.Millisecond)
			c.set(rsWith("a", "11", 1, 1, 0, 0))
			time.Sleep(100 * time.Millisecond)
			readyAt <- time.Now()
			c.set(rsWith("a", "12", 1, 1, 1, 1))
		}()
		st, err := (&Activities{Observer: cachingObserver{c}}).QuickWait(context.Background(), in)
		require.NoError(t, err)
		require.Len(t, st.ReplicaSets, 1)
		assert.Equal(t, int32(1), st.ReplicaSets[0].Status.AvailableReplicas, "it returned the pod available, not just created")
		require.NotNil(t, st.ObservedAt)
		assert.False(t, st.ObservedAt.Before(<-readyAt), "seen when it became ready, not when it was created")
	})
	t.Run("created, never ready: the created state at the bound, seen when created", func(t *testing.T) {
		created := rsWith("a", "11", 1, 1, 0, 0)
		c := newFakeCache(rsWith("a", "10", 1, 0, 0, 0))
		short := in
		short.Timeout = time.Second
		go func() {
			time.Sleep(50 * time.Millisecond)
			c.set(created)
		}()
		start := time.Now()
		st, err := (&Activities{Observer: cachingObserver{c}, Kube: fake.NewClientset(created)}).QuickWait(context.Background(), short)
		require.NoError(t, err)
		returned := time.Now()
		assert.GreaterOrEqual(t, returned.Sub(start), time.Second, "a pod created is no reason to end it")
		require.Len(t, st.ReplicaSets, 1)
		assert.Equal(t, int32(1), st.ReplicaSets[0].Status.Replicas)
		require.NotNil(t, st.ObservedAt)
		assert.True(t, st.ObservedAt.Before(start.Add(time.Second)), "stamped when the pod was created, not when the wait ended at %v", returned.Sub(start))
	})
	t.Run("nothing changes: the state seen, at the bound", func(t *testing.T) {
		c := newFakeCache(rsWith("a", "10", 1, 0, 0, 0))
		short := in
		short.Timeout = 200 * time.Millisecond
		st, err := (&Activities{Observer: cachingObserver{c}, Kube: fake.NewClientset(rsWith("a", "10", 1, 0, 0, 0))}).QuickWait(context.Background(), short)
		require.NoError(t, err)
		assert.Equal(t, seen.Digest, st.Digest)
	})
	t.Run("without the state seen it refuses", func(t *testing.T) {
		_, err := (&Activities{}).QuickWait(context.Background(), WaitForChangeInput{Timeout: time.Second})
		require.Error(t, err)
	})
}

// A worker runs at most MaxQuickWaits quick waits at once: one more
// returns at once the state seen, without ObservedAt (it did not wait),
// so a fleet of rollouts does not hold the worker's workflow-task slots.
func TestQuickWaitsBeyondTheLimitDoNotWait(t *testing.T) {
	for i := 0; i < MaxQuickWaits; i++ {
		quickWaits <- struct{}{}
	}
	defer func() {
		for i := 0; i < MaxQuickWaits; i++ {
			<-quickWaits
		}
	}()
	seen := stateOf(rsWith("a", "10", 1, 0, 0, 0))
	start := time.Now()
	st, err := (&Activities{}).QuickWait(context.Background(), WaitForChangeInput{Seen: seen, Timeout: time.Minute})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), time.Second, "it did not wait")
	assert.Equal(t, seen.Digest, st.Digest)
	assert.Nil(t, st.ObservedAt)
}
