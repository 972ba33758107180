package rollout

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestReconcileNewReplicaSet is upstream's
// TestDeploymentController_reconcileNewReplicaSet (maxUnavailable 0).
func TestReconcileNewReplicaSet(t *testing.T) {
	tests := []struct {
		name                string
		deploymentReplicas  int32
		maxSurge            intstr.IntOrString
		oldReplicas         int32
		newReplicas         int32
		scaleExpected       bool
		expectedNewReplicas int32
	}{
		{"should not scale up", 10, intstr.FromInt32(0), 10, 0, false, 0},
		{"scale up to surge", 10, intstr.FromInt32(2), 10, 0, true, 2},
		{"scale up to surge with fewer old pods", 10, intstr.FromInt32(2), 5, 0, true, 7},
		{"surge used up", 10, intstr.FromInt32(2), 10, 2, false, 0},
		{"should scale down", 10, intstr.FromInt32(2), 2, 11, true, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newRS := rs("foo-v2", tt.newReplicas, nil, noTimestamp)
			oldRS := rs("foo-v1", tt.oldReplicas, nil, noTimestamp)
			d := newDeployment("foo", tt.deploymentReplicas, nil, &tt.maxSurge, intOrStr(0), map[string]string{"foo": "bar"})
			op, err := reconcileNewReplicaSet([]*appsv1.ReplicaSet{newRS, oldRS}, newRS, d)
			require.NoError(t, err)
			if !tt.scaleExpected {
				assert.Nil(t, op)
				return
			}
			require.NotNil(t, op)
			assert.Equal(t, "foo-v2", op.ReplicaSet)
			assert.Equal(t, tt.expectedNewReplicas, op.To)
		})
	}
}

// TestReconcileOldReplicaSets is upstream's
// TestDeploymentController_reconcileOldReplicaSets (maxSurge 0); ours also
// checks the resulting old size, which upstream's table lists but never
// verified.
func TestReconcileOldReplicaSets(t *testing.T) {
	tests := []struct {
		name                string
		deploymentReplicas  int32
		maxUnavailable      intstr.IntOrString
		oldReplicas         int32
		newReplicas         int32
		readyPodsFromOldRS  int32
		readyPodsFromNewRS  int32
		scaleExpected       bool
		expectedOldReplicas int32
		expectedOps         int
	}{
		{"0/0 resolves to maxUnavailable 1", 10, intstr.FromInt32(0), 10, 0, 10, 0, true, 9, 1},
		{"maxUnavailable 2", 10, intstr.FromInt32(2), 10, 0, 10, 0, true, 8, 1},
		{"expect unhealthy replicas from old replica sets been cleaned up", 10, intstr.FromInt32(2), 10, 0, 8, 0, true, 8, 1},
		{"expect 1 unhealthy replica from old replica sets been cleaned up, and 1 ready pod been scaled down", 10, intstr.FromInt32(2), 10, 0, 9, 0, true, 8, 2},
		{"the unavailable pods from the newRS would not make us scale down old RSs in a further step", 10, intstr.FromInt32(2), 8, 2, 8, 0, false, 8, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newSelector := map[string]string{"foo": "new"}
			newRS := rs("foo-new", tt.newReplicas, newSelector, noTimestamp)
			newRS.Status.AvailableReplicas = tt.readyPodsFromNewRS
			oldRS := rs("foo-old", tt.oldReplicas, map[string]string{"foo": "old"}, noTimestamp)
			oldRS.Status.AvailableReplicas = tt.readyPodsFromOldRS
			d := newDeployment("foo", tt.deploymentReplicas, nil, intOrStr(0), &tt.maxUnavailable, newSelector)

			all := []*appsv1.ReplicaSet{oldRS, newRS}
			before := deepCopies(all)
			ops, cleaned, scaled := reconcileOldReplicaSets(all, []*appsv1.ReplicaSet{oldRS}, newRS, d)
			requireUnchanged(t, before, all)

			assert.Equal(t, tt.scaleExpected, cleaned+scaled > 0)
			assert.Len(t, ops, tt.expectedOps)
			assert.Equal(t, tt.expectedOldReplicas, sizesAfter(all, ops)["foo-old"])
			for _, op := range ops {
				assert.Equal(t, "foo-old", op.ReplicaSet)
			}
		})
	}
}

// TestCleanupUnhealthyReplicas is upstream's
// TestDeploymentController_cleanupUnhealthyReplicas.
func TestCleanupUnhealthyReplicas(t *testing.T) {
	tests := []struct {
		oldReplicas          int32
		readyPods            int32
		maxCleanupCount      int32
		cleanupCountExpected int32
	}{
		{10, 8, 1, 1},
		{10, 8, 3, 2},
		{10, 8, 0, 0},
		{10, 10, 3, 0},
	}
	for _, tt := range tests {
		oldRS := rs("foo-v2", tt.oldReplicas, nil, noTimestamp)
		oldRS.Status.AvailableReplicas = tt.readyPods
		d := newDeployment("foo", 10, nil, intOrStr(2), intOrStr(2), nil)
		updated, ops, count, err := cleanupUnhealthyReplicas([]*appsv1.ReplicaSet{oldRS}, d, tt.maxCleanupCount)
		require.NoError(t, err)
		assert.Equal(t, tt.cleanupCountExpected, count, "%+v", tt)
		assert.Equal(t, tt.oldReplicas-tt.cleanupCountExpected, *updated[0].Spec.Replicas)
		assert.Equal(t, tt.oldReplicas, *oldRS.Spec.Replicas, "input must not be mutated")
		if tt.cleanupCountExpected == 0 {
			assert.Empty(t, ops)
		} else {
			assert.Equal(t, []ScaleOp{{ReplicaSet: "foo-v2", From: 10, To: 10 - tt.cleanupCountExpected, DesiredReplicas: 10, MaxReplicas: 12,
				Reason: "Scaled down replica set foo-v2 from 10 to " + itoa(10-tt.cleanupCountExpected)}}, ops)
			assert.Equal(t, "10", updated[0].Annotations[DesiredReplicasAnnotation], "updated copy carries the annotations")
		}
	}
}

func TestCleanupUnhealthyReplicasOrderAndError(t *testing.T) {
	d := newDeployment("foo", 10, nil, intOrStr(0), intOrStr(3), nil)
	older := rs("older", 5, nil, metav1.NewTime(at(0)))
	older.Status.AvailableReplicas = 3
	newer := rs("newer", 4, nil, metav1.NewTime(at(1)))
	newer.Status.AvailableReplicas = 1

	t.Run("oldest first, within the budget", func(t *testing.T) {
		updated, ops, count, err := cleanupUnhealthyReplicas([]*appsv1.ReplicaSet{newer, older}, d, 3)
		require.NoError(t, err)
		assert.Equal(t, int32(3), count)
		assert.Equal(t, []string{"older", "newer"}, []string{updated[0].Name, updated[1].Name})
		assert.Equal(t, map[string]int32{"older": 3, "newer": 3}, sizesAfter([]*appsv1.ReplicaSet{older, newer}, ops))
	})

	t.Run("more available than replicas is an error; earlier ops are kept", func(t *testing.T) {
		stale := rs("stale", 2, nil, metav1.NewTime(at(1)))
		stale.Status.AvailableReplicas = 4
		_, ops, count, err := cleanupUnhealthyReplicas([]*appsv1.ReplicaSet{stale, older}, d, 3)
		assert.Error(t, err)
		assert.Equal(t, int32(0), count)
		require.Len(t, ops, 1)
		assert.Equal(t, "older", ops[0].ReplicaSet)
	})
}

// TestScaleDownOldReplicaSetsForRollingUpdate is upstream's
// TestDeploymentController_scaleDownOldReplicaSetsForRollingUpdate (maxSurge 0).
func TestScaleDownOldReplicaSetsForRollingUpdate(t *testing.T) {
	tests := []struct {
		name                string
		deploymentReplicas  int32
		maxUnavailable      intstr.IntOrString
		readyPods           int32
		oldReplicas         int32
		scaleExpected       bool
		expectedOldReplicas int32
	}{
		{"0/0 resolves to maxUnavailable 1", 10, intstr.FromInt32(0), 10, 10, true, 9},
		{"maxUnavailable 2", 10, intstr.FromInt32(2), 10, 10, true, 8},
		{"not enough available", 10, intstr.FromInt32(2), 8, 10, false, 0},
		{"nothing left to scale", 10, intstr.FromInt32(2), 10, 0, false, 0},
		{"far too few available", 10, intstr.FromInt32(2), 1, 10, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oldRS := rs("foo-v2", tt.oldReplicas, nil, noTimestamp)
			oldRS.Status.AvailableReplicas = tt.readyPods
			d := newDeployment("foo", tt.deploymentReplicas, nil, intOrStr(0), &tt.maxUnavailable, map[string]string{"foo": "bar"})
			ops, scaled := scaleDownOldReplicaSetsForRollingUpdate([]*appsv1.ReplicaSet{oldRS}, []*appsv1.ReplicaSet{oldRS}, d)
			if !tt.scaleExpected {
				assert.Zero(t, scaled)
				assert.Empty(t, ops)
				return
			}
			require.Len(t, ops, 1)
			assert.Equal(t, tt.expectedOldReplicas, ops[0].To)
			assert.Equal(t, tt.oldReplicas-tt.expectedOldReplicas, scaled)
		})
	}
}

func TestScaleDownOldReplicaSetsForRollingUpdateSpreads(t *testing.T) {
	// Budget 4 (7 available, minAvailable 3): oldest first, skipping empty ones.
	d := newDeployment("foo", 4, nil, intOrStr(0), intOrStr(1), nil)
	a := rs("a", 2, nil, metav1.NewTime(at(0)))
	empty := rs("b", 0, nil, metav1.NewTime(at(1)))
	c := rs("c", 5, nil, metav1.NewTime(at(2)))
	a.Status.AvailableReplicas, c.Status.AvailableReplicas = 2, 5
	ops, scaled := scaleDownOldReplicaSetsForRollingUpdate([]*appsv1.ReplicaSet{c, empty, a}, []*appsv1.ReplicaSet{c, empty, a}, d)
	assert.Equal(t, int32(4), scaled)
	assert.Equal(t, []string{"a", "c"}, []string{ops[0].ReplicaSet, ops[1].ReplicaSet})
	assert.Equal(t, map[string]int32{"a": 0, "b": 0, "c": 3}, sizesAfter([]*appsv1.ReplicaSet{a, empty, c}, ops))
}

func TestRolloutRolling(t *testing.T) {
	labels := map[string]string{"app": "web"}
	deployment := func(replicas int32, maxSurge, maxUnavailable int32, status appsv1.DeploymentStatus) *appsv1.Deployment {
		d := newDeployment("web", replicas, ptrTo(int32(1)), intOrStr(maxSurge), intOrStr(maxUnavailable), labels)
		d.Status = status
		return d
	}
	// current builds a ReplicaSet with the Deployment's template.
	current := func(d *appsv1.Deployment, name string, size, available int32) *appsv1.ReplicaSet {
		r := newReplicaSet(d, name, size)
		r.CreationTimestamp = metav1.NewTime(at(10))
		r.Status = appsv1.ReplicaSetStatus{Replicas: size, AvailableReplicas: available}
		return withRevision(r, "3")
	}
	// old builds a ReplicaSet with another image, created at minute m.
	old := func(d *appsv1.Deployment, name string, size, available int32, m int, revision string) *appsv1.ReplicaSet {
		r := newReplicaSet(d, name, size)
		r.Spec.Template.Spec.Containers[0].Image = "foo/bar:" + name
		r.CreationTimestamp = metav1.NewTime(at(m))
		r.Status = appsv1.ReplicaSetStatus{Replicas: size, AvailableReplicas: available}
		return withRevision(r, revision)
	}
	complete := func(n int32) appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{Replicas: n, UpdatedReplicas: n, AvailableReplicas: n}
	}
	type want struct {
		step    Step
		create  int32 // size of the created ReplicaSet, -1 for none
		sizes   map[string]int32
		deletes []string
		nOps    int
	}
	tests := []struct {
		name   string
		d      *appsv1.Deployment
		newRS  func(*appsv1.Deployment) *appsv1.ReplicaSet
		oldRSs func(*appsv1.Deployment) []*appsv1.ReplicaSet
		want   want
	}{
		{
			name: "creating the new replica set is not a scale up: old ones shrink in the same sync",
			d:    deployment(4, 1, 1, appsv1.DeploymentStatus{}),
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 4, 4, 0, "1")}
			},
			want: want{step: StepScaleDownOld, create: 1, sizes: map[string]int32{"web-a": 3}, nOps: 1},
		},
		{
			name: "created and nothing else possible",
			d:    deployment(3, 1, 0, appsv1.DeploymentStatus{}),
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 3, 3, 0, "1")}
			},
			want: want{step: StepCreateNew, create: 1, sizes: map[string]int32{"web-a": 3}},
		},
		{
			name:  "one direction per sync: scale up, old untouched",
			d:     deployment(4, 1, 1, appsv1.DeploymentStatus{}),
			newRS: func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, "web-new", 1, 1) },
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 3, 3, 0, "1")}
			},
			want: want{step: StepScaleUpNew, create: -1, sizes: map[string]int32{"web-new": 2, "web-a": 3}, nOps: 1},
		},
		{
			name:  "new replica set above spec.replicas shrinks",
			d:     deployment(4, 1, 1, appsv1.DeploymentStatus{}),
			newRS: func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, "web-new", 5, 5) },
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 1, 1, 0, "1")}
			},
			want: want{step: StepScaleDownNew, create: -1, sizes: map[string]int32{"web-new": 4, "web-a": 1}, nOps: 1},
		},
		{
			name:  "budget subtracts unavailable new pods",
			d:     deployment(10, 3, 2, appsv1.DeploymentStatus{}),
			newRS: func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, "web-new", 5, 0) },
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 8, 8, 0, "1")}
			},
			want: want{step: StepWait, create: -1, sizes: map[string]int32{"web-new": 5, "web-a": 8}},
		},
		{
			name:  "unhealthy old pods are removed first",
			d:     deployment(10, 0, 2, appsv1.DeploymentStatus{}),
			newRS: func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, "web-new", 0, 0) },
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 10, 8, 0, "1")}
			},
			want: want{step: StepCleanupUnhealthy, create: -1, sizes: map[string]int32{"web-new": 0, "web-a": 8}, nOps: 1},
		},
		{
			name:  "unhealthy cleanup then scale down on the updated sizes",
			d:     deployment(10, 0, 2, appsv1.DeploymentStatus{}),
			newRS: func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, "web-new", 0, 0) },
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 10, 9, 0, "1")}
			},
			want: want{step: StepScaleDownOld, create: -1, sizes: map[string]int32{"web-new": 0, "web-a": 8}, nOps: 2},
		},
		{
			name:  "stale old status stops the old reconcile half way, as upstream",
			d:     deployment(10, 0, 3, appsv1.DeploymentStatus{}),
			newRS: func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, "web-new", 3, 3) },
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 5, 3, 0, "1"), old(d, "web-b", 2, 4, 1, "2")}
			},
			want: want{step: StepCleanupUnhealthy, create: -1, sizes: map[string]int32{"web-new": 3, "web-a": 3, "web-b": 2}, nOps: 1},
		},
		{
			name:  "complete: history beyond the limit is deleted, lowest revision first",
			d:     deployment(3, 1, 0, complete(3)),
			newRS: func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, "web-new", 3, 3) },
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 0, 0, 0, "1"), old(d, "web-b", 0, 0, 1, "2")}
			},
			want: want{step: StepCleanupHistory, create: -1, sizes: map[string]int32{"web-new": 3, "web-a": 0, "web-b": 0}, deletes: []string{"web-a"}},
		},
		{
			name:  "complete and nothing to delete",
			d:     deployment(3, 1, 0, complete(3)),
			newRS: func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, "web-new", 3, 3) },
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 0, 0, 0, "1")}
			},
			want: want{step: StepComplete, create: -1, sizes: map[string]int32{"web-new": 3, "web-a": 0}},
		},
		{
			name:  "not complete yet: history kept",
			d:     deployment(3, 1, 0, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2}),
			newRS: func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, "web-new", 3, 2) },
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 0, 0, 0, "1"), old(d, "web-b", 0, 0, 1, "2")}
			},
			want: want{step: StepWait, create: -1, sizes: map[string]int32{"web-new": 3, "web-a": 0, "web-b": 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var newRS *appsv1.ReplicaSet
			if tt.newRS != nil {
				newRS = tt.newRS(tt.d)
			}
			oldRSs := tt.oldRSs(tt.d)
			all := append(append([]*appsv1.ReplicaSet{}, oldRSs...), newRS)
			before, beforeD := deepCopies(all), tt.d.DeepCopy()

			plan, err := RolloutRolling(tt.d, newRS, oldRSs)
			require.NoError(t, err)
			requireUnchanged(t, before, all)
			assert.Equal(t, beforeD, tt.d)

			assert.Equal(t, tt.want.step, plan.Step)
			if tt.want.create < 0 {
				assert.Nil(t, plan.Create)
			} else {
				require.NotNil(t, plan.Create)
				assert.Equal(t, tt.want.create, *plan.Create.Spec.Replicas)
				assert.Equal(t, "2", plan.Create.Annotations[RevisionAnnotation], "max old revision + 1")
			}
			assert.Len(t, plan.Scales, tt.want.nOps)
			got := sizesAfter(all, plan.Scales)
			for name, size := range tt.want.sizes {
				assert.Equal(t, size, got[name], name)
			}
			assert.Equal(t, tt.want.deletes, plan.Deletes)
		})
	}
}

func TestRolloutRollingHashCollision(t *testing.T) {
	d := newDeployment("web", 3, nil, intOrStr(1), intOrStr(0), map[string]string{"app": "web"})
	wanted, err := NewReplicaSetFor(d, nil)
	require.NoError(t, err)
	squatter := newReplicaSet(d, wanted.Name, 2)
	squatter.Spec.Template.Spec.Containers[0].Image = "someone/else"

	plan, err := RolloutRolling(d, nil, []*appsv1.ReplicaSet{squatter})
	require.NoError(t, err)
	assert.Equal(t, StepHashCollision, plan.Step)
	assert.True(t, plan.Empty())
	assert.Contains(t, plan.Message, wanted.Name)
}

func TestRolloutRollingErrors(t *testing.T) {
	d := newDeployment("web", 3, nil, pct("x%"), intOrStr(0), map[string]string{"app": "web"})
	_, err := RolloutRolling(d, nil, nil)
	assert.Error(t, err, "new replica set cannot be sized")

	newRS := newReplicaSet(d, "web-new", 1)
	_, err = RolloutRolling(d, newRS, nil)
	assert.Error(t, err, "new replica set cannot be grown")
}

func itoa(v int32) string { return strconv.Itoa(int(v)) }
