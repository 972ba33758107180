package statefulset

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// pods is n pods of a StatefulSet: ordinals at or above from at revision
// "new", the rest "old", all available unless listed in notReady.
func pods(n, from int32, notReady ...int32) []Pod {
	var out []Pod
	for ord := range n {
		rev := "old"
		if ord >= from {
			rev = "new"
		}
		ok := !slices.Contains(notReady, ord)
		out = append(out, Pod{Ordinal: ord, Revision: rev, Ready: ok, Available: ok})
	}
	return out
}

// Issue 39.2: a rolling update through the partition goes from the highest
// ordinal down, one step at a time (or maxUnavailable), each step waiting
// until the ordinals it released run the update revision and are
// available; a canary's target stops short of 0.
func TestNextLowersThePartitionOnlyOnceTheReleasedOrdinalsAreThere(t *testing.T) {
	for _, c := range []struct {
		name         string
		o            Observed
		target, maxU int32
		want         Step
	}{
		{"new template, nothing released yet: release the highest ordinal",
			Observed{Name: "db", Replicas: 3, Partition: 3, UpdateRevision: "new", Pods: pods(3, 3)}, 0, 1,
			Step{Partition: 2, Waiting: "db-2 to run the update revision"}},
		{"the released ordinal not replaced yet: wait",
			Observed{Name: "db", Replicas: 3, Partition: 2, UpdateRevision: "new", Pods: pods(3, 3)}, 0, 1,
			Step{Partition: 2, Waiting: "db-2 to be replaced by the update revision"}},
		{"replaced, not Ready: wait",
			Observed{Name: "db", Replicas: 3, Partition: 2, UpdateRevision: "new", Pods: pods(3, 2, 2)}, 0, 1,
			Step{Partition: 2, Waiting: "db-2 to turn Ready"}},
		{"Ready, not for minReadySeconds: wait",
			Observed{Name: "db", Replicas: 3, Partition: 2, UpdateRevision: "new", Pods: []Pod{
				{Ordinal: 0, Revision: "old", Ready: true, Available: true}, {Ordinal: 1, Revision: "old", Ready: true, Available: true},
				{Ordinal: 2, Revision: "new", Ready: true}}}, 0, 1,
			Step{Partition: 2, Waiting: "db-2 to be Ready for minReadySeconds"}},
		{"being replaced: wait",
			Observed{Name: "db", Replicas: 3, Partition: 2, UpdateRevision: "new", Pods: []Pod{
				{Ordinal: 0, Revision: "old", Ready: true, Available: true}, {Ordinal: 1, Revision: "old", Ready: true, Available: true},
				{Ordinal: 2, Revision: "old", Ready: true, Available: true, Terminating: true}}}, 0, 1,
			Step{Partition: 2, Waiting: "db-2 to be replaced"}},
		{"deleted, not recreated yet: wait",
			Observed{Name: "db", Replicas: 3, Partition: 2, UpdateRevision: "new", Pods: pods(2, 3)}, 0, 1,
			Step{Partition: 2, Waiting: "db-2 to be created"}},
		{"db-2 there: release db-1",
			Observed{Name: "db", Replicas: 3, Partition: 2, UpdateRevision: "new", Pods: pods(3, 2)}, 0, 1,
			Step{Partition: 1, Waiting: "db-1 to run the update revision", Updated: 1}},
		{"maxUnavailable 2: two at a time",
			Observed{Name: "db", Replicas: 5, Partition: 5, UpdateRevision: "new", Pods: pods(5, 5)}, 0, 2,
			Step{Partition: 3, Waiting: "db-3 to run the update revision"}},
		{"never below the target",
			Observed{Name: "db", Replicas: 5, Partition: 3, UpdateRevision: "new", Pods: pods(5, 3)}, 2, 2,
			Step{Partition: 2, Waiting: "db-2 to run the update revision", Updated: 2}},
		{"a canary's target reached",
			Observed{Name: "db", Replicas: 4, Partition: 3, UpdateRevision: "new", Pods: pods(4, 3)}, 3, 1,
			Step{Partition: 3, Reached: true, Updated: 1}},
		{"the last ordinal there: complete",
			Observed{Name: "db", Replicas: 3, Partition: 0, UpdateRevision: "new", Pods: pods(3, 0)}, 0, 1,
			Step{Partition: 0, Reached: true, Updated: 3}},
		{"every pod already runs the update revision (just created): straight to the target",
			Observed{Name: "db", Replicas: 3, Partition: 3, UpdateRevision: "new", Pods: pods(3, 0)}, 0, 1,
			Step{Partition: 0, Reached: true, Updated: 3}},
		{"a partition above the replicas (scaled down) counts as the replicas",
			Observed{Name: "db", Replicas: 2, Partition: 5, UpdateRevision: "new", Pods: pods(2, 2)}, 0, 1,
			Step{Partition: 1, Waiting: "db-1 to run the update revision"}},
		{"zero replicas: nothing to wait for",
			Observed{Name: "db", Replicas: 0, Partition: 0, UpdateRevision: "new"}, 0, 1,
			Step{Partition: 0, Reached: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Next(c.o, c.target, c.maxU))
		})
	}
}

// A canary's weight is the share of pods the partition releases, rounded
// up as a canary's share of pods is.
func TestPartitionForIsTheShareOfPodsReleased(t *testing.T) {
	for _, c := range []struct{ weight, replicas, want int32 }{
		{0, 4, 4}, {25, 4, 3}, {50, 4, 2}, {100, 4, 0},
		{10, 3, 2}, {34, 3, 1}, {67, 3, 0}, {50, 1, 0}, {150, 4, 0}, {-5, 4, 4}, {50, 0, 0},
	} {
		assert.Equal(t, c.want, PartitionFor(c.weight, c.replicas), "%d%% of %d", c.weight, c.replicas)
	}
}

// A return to the previous revision deletes the pods of another revision
// that never turned Ready, highest first: the controller waits for each
// pod it replaced to be Ready before the next, so a version whose pods
// never start would hold the way back (review: a pod not Ready below the
// partition held it too). Guards the review's finding that a return after
// a completed rollout deleted pods below the partition, which came back at
// the current revision, the failed one, forever: the partition goes down
// to them first.
func TestForcedRollbackDeletesThePodsOfAnotherRevisionThatNeverTurnedReady(t *testing.T) {
	for _, c := range []struct {
		name          string
		o             Observed
		wantPartition int32
		wantDelete    []int32
	}{
		{"an abort mid-rollout: the released pods that never started",
			Observed{Replicas: 4, Partition: 1, UpdateRevision: "old", CurrentRevision: "old", Pods: pods(4, 1, 2, 3)}, 1, []int32{3, 2}},
		{"below the partition too (OrderedReady), where a pod comes back at the current revision, the one returned to",
			Observed{Replicas: 4, Partition: 3, UpdateRevision: "old", CurrentRevision: "old", Pods: pods(4, 1, 2, 3)}, 3, []int32{3, 2}},
		{"after a completed rollout, the current revision is the failed one: the partition goes down to the lowest stuck pod first",
			Observed{Replicas: 4, Partition: 4, UpdateRevision: "old", CurrentRevision: "new", Pods: pods(4, 0, 0, 1, 2, 3)}, 0, []int32{3, 2, 1, 0}},
		{"after a completed rollout whose pods are Ready: nothing forced, the steps take them back",
			Observed{Replicas: 4, Partition: 4, UpdateRevision: "old", CurrentRevision: "new", Pods: pods(4, 0)}, 4, nil},
		{"pods of the revision returned to are never deleted",
			Observed{Replicas: 4, Partition: 1, UpdateRevision: "new", CurrentRevision: "old", Pods: pods(4, 1, 2, 3)}, 1, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, del := ForcedRollback(c.o)
			assert.Equal(t, c.wantPartition, p, "partition")
			assert.Equal(t, c.wantDelete, del, "pods to delete")
		})
	}
	o := Observed{Replicas: 4, Partition: 1, UpdateRevision: "old", CurrentRevision: "old", Pods: pods(4, 1, 2, 3)}
	o.Pods[3].Terminating = true
	_, del := ForcedRollback(o)
	assert.Equal(t, []int32{2}, del, "one already going is not deleted again")
}
