package rollout

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestScale is upstream's TestScale. Before scaling, every ReplicaSet gets
// the replicas annotations the previous Deployment (oldDeployment) would have
// written; the expectation is each ReplicaSet's size after the plan.
func TestScale(t *testing.T) {
	newTimestamp := metav1.Date(2016, 5, 20, 2, 0, 0, 0, time.UTC)
	oldTimestamp := metav1.Date(2016, 5, 20, 1, 0, 0, 0, time.UTC)
	olderTimestamp := metav1.Date(2016, 5, 20, 0, 0, 0, 0, time.UTC)

	updatedTemplate := func(replicas int32) *appsv1.Deployment {
		d := newDeployment("foo", replicas, nil, nil, nil, map[string]string{"foo": "bar"})
		d.Spec.Template.Labels["another"] = "label"
		return d
	}

	tests := []struct {
		name          string
		deployment    *appsv1.Deployment
		oldDeployment *appsv1.Deployment

		newRS  *appsv1.ReplicaSet
		oldRSs []*appsv1.ReplicaSet

		expectedNew *appsv1.ReplicaSet
		expectedOld []*appsv1.ReplicaSet
		// untouched lists ReplicaSets that must get no operation at all.
		untouched []string

		desiredReplicasAnnotations map[string]int32
	}{
		{
			name:          "normal scaling event: 10 -> 12",
			deployment:    newDeployment("foo", 12, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 10, nil, nil, nil, nil),
			newRS:         rs("foo-v1", 10, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{},
			expectedNew:   rs("foo-v1", 12, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{},
		},
		{
			name:          "normal scaling event: 10 -> 5",
			deployment:    newDeployment("foo", 5, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 10, nil, nil, nil, nil),
			newRS:         rs("foo-v1", 10, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{},
			expectedNew:   rs("foo-v1", 5, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{},
		},
		{
			name:          "proportional scaling: 5 -> 10",
			deployment:    newDeployment("foo", 10, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 5, nil, nil, nil, nil),
			newRS:         rs("foo-v2", 2, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v1", 3, nil, oldTimestamp)},
			expectedNew:   rs("foo-v2", 4, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v1", 6, nil, oldTimestamp)},
		},
		{
			name:          "proportional scaling: 5 -> 3",
			deployment:    newDeployment("foo", 3, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 5, nil, nil, nil, nil),
			newRS:         rs("foo-v2", 2, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v1", 3, nil, oldTimestamp)},
			expectedNew:   rs("foo-v2", 1, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v1", 2, nil, oldTimestamp)},
		},
		{
			name:          "proportional scaling: 9 -> 4",
			deployment:    newDeployment("foo", 4, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 9, nil, nil, nil, nil),
			newRS:         rs("foo-v2", 8, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v1", 1, nil, oldTimestamp)},
			expectedNew:   rs("foo-v2", 4, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v1", 0, nil, oldTimestamp)},
		},
		{
			name:          "proportional scaling: 7 -> 10",
			deployment:    newDeployment("foo", 10, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 7, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 2, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 3, nil, oldTimestamp), rs("foo-v1", 2, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 3, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 4, nil, oldTimestamp), rs("foo-v1", 3, nil, olderTimestamp)},
		},
		{
			name:          "proportional scaling: 13 -> 8",
			deployment:    newDeployment("foo", 8, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 13, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 2, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 8, nil, oldTimestamp), rs("foo-v1", 3, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 1, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 5, nil, oldTimestamp), rs("foo-v1", 2, nil, olderTimestamp)},
		},
		{
			// Scales up the new replica set.
			name:          "leftover distribution: 3 -> 4",
			deployment:    newDeployment("foo", 4, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 3, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 1, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 1, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 2, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 1, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
		},
		{
			// Scales down the older replica set.
			name:          "leftover distribution: 3 -> 2",
			deployment:    newDeployment("foo", 2, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 3, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 1, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 1, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 1, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 1, nil, oldTimestamp), rs("foo-v1", 0, nil, olderTimestamp)},
		},
		{
			// Scales up the latest replica set first.
			name:          "proportional scaling (no new rs): 4 -> 5",
			deployment:    newDeployment("foo", 5, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 4, nil, nil, nil, nil),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 2, nil, oldTimestamp), rs("foo-v1", 2, nil, olderTimestamp)},
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 3, nil, oldTimestamp), rs("foo-v1", 2, nil, olderTimestamp)},
		},
		{
			name:          "proportional scaling: 6 -> 0",
			deployment:    newDeployment("foo", 0, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 6, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 3, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 2, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 0, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 0, nil, oldTimestamp), rs("foo-v1", 0, nil, olderTimestamp)},
		},
		{
			name:          "proportional scaling: 0 -> 6",
			deployment:    newDeployment("foo", 6, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 6, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 0, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 0, nil, oldTimestamp), rs("foo-v1", 0, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 6, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 0, nil, oldTimestamp), rs("foo-v1", 0, nil, olderTimestamp)},
			untouched:     []string{"foo-v2", "foo-v1"},
		},
		{
			// Upstream simulates a failed update of foo-v3 and foo-v1; in the
			// pure version neither needs an update in the first place.
			name:                       "failed rs update",
			deployment:                 newDeployment("foo", 5, nil, nil, nil, nil),
			oldDeployment:              newDeployment("foo", 5, nil, nil, nil, nil),
			newRS:                      rs("foo-v3", 2, nil, newTimestamp),
			oldRSs:                     []*appsv1.ReplicaSet{rs("foo-v2", 1, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
			expectedNew:                rs("foo-v3", 2, nil, newTimestamp),
			expectedOld:                []*appsv1.ReplicaSet{rs("foo-v2", 2, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
			untouched:                  []string{"foo-v3", "foo-v1"},
			desiredReplicasAnnotations: map[string]int32{"foo-v2": 3},
		},
		{
			name:          "deployment with surge pods",
			deployment:    newDeployment("foo", 20, nil, intOrStr(2), nil, nil),
			oldDeployment: newDeployment("foo", 10, nil, intOrStr(2), nil, nil),
			newRS:         rs("foo-v2", 6, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v1", 6, nil, oldTimestamp)},
			expectedNew:   rs("foo-v2", 11, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v1", 11, nil, oldTimestamp)},
		},
		{
			name:          "change both surge and size",
			deployment:    newDeployment("foo", 50, nil, intOrStr(6), nil, nil),
			oldDeployment: newDeployment("foo", 10, nil, intOrStr(3), nil, nil),
			newRS:         rs("foo-v2", 5, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v1", 8, nil, oldTimestamp)},
			expectedNew:   rs("foo-v2", 22, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v1", 34, nil, oldTimestamp)},
		},
		{
			name:          "change both size and template",
			deployment:    updatedTemplate(14),
			oldDeployment: newDeployment("foo", 10, nil, nil, nil, map[string]string{"foo": "bar"}),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 7, nil, newTimestamp), rs("foo-v1", 3, nil, oldTimestamp)},
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 10, nil, newTimestamp), rs("foo-v1", 4, nil, oldTimestamp)},
		},
		{
			name:          "saturated but broken new replica set does not affect old pods",
			deployment:    newDeployment("foo", 2, nil, intOrStr(1), intOrStr(1), nil),
			oldDeployment: newDeployment("foo", 2, nil, intOrStr(1), intOrStr(1), nil),
			newRS: func() *appsv1.ReplicaSet {
				r := rs("foo-v2", 2, nil, newTimestamp)
				r.Status.AvailableReplicas = 0
				return r
			}(),
			oldRSs:      []*appsv1.ReplicaSet{rs("foo-v1", 1, nil, oldTimestamp)},
			expectedNew: rs("foo-v2", 2, nil, newTimestamp),
			expectedOld: []*appsv1.ReplicaSet{rs("foo-v1", 1, nil, oldTimestamp)},
		},
		// Ours.
		{
			name:          "saturated and available new replica set: old ones go to 0",
			deployment:    newDeployment("foo", 2, nil, intOrStr(1), intOrStr(1), nil),
			oldDeployment: newDeployment("foo", 2, nil, intOrStr(1), intOrStr(1), nil),
			newRS: func() *appsv1.ReplicaSet {
				r := rs("foo-v2", 2, nil, newTimestamp)
				r.Status.AvailableReplicas = 2
				return r
			}(),
			oldRSs:      []*appsv1.ReplicaSet{rs("foo-v1", 1, nil, oldTimestamp), rs("foo-v0", 0, nil, olderTimestamp)},
			expectedNew: rs("foo-v2", 2, nil, newTimestamp),
			expectedOld: []*appsv1.ReplicaSet{rs("foo-v1", 0, nil, oldTimestamp), rs("foo-v0", 0, nil, olderTimestamp)},
			untouched:   []string{"foo-v2", "foo-v0"},
		},
		{
			name:          "single active replica set already at size: nothing to do",
			deployment:    newDeployment("foo", 4, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 3, nil, nil, nil, nil),
			newRS:         rs("foo-v2", 4, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v1", 0, nil, oldTimestamp)},
			expectedNew:   rs("foo-v2", 4, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v1", 0, nil, oldTimestamp)},
			untouched:     []string{"foo-v2", "foo-v1"},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			annotate := func(r *appsv1.ReplicaSet) {
				desired := *tt.oldDeployment.Spec.Replicas
				if v, ok := tt.desiredReplicasAnnotations[r.Name]; ok {
					desired = v
				}
				SetReplicasAnnotations(r, desired, desired+MaxSurge(*tt.oldDeployment))
			}
			all := append([]*appsv1.ReplicaSet{}, tt.oldRSs...)
			if tt.newRS != nil {
				annotate(tt.newRS)
				all = append(all, tt.newRS)
			}
			for _, r := range tt.oldRSs {
				annotate(r)
			}
			before := deepCopies(all)

			plan := Scale(tt.deployment, tt.newRS, tt.oldRSs)
			assert.Equal(t, StepProportional, plan.Step)
			requireUnchanged(t, before, all)

			got := sizesAfter(all, plan.Scales)
			if tt.expectedNew != nil {
				assert.Equal(t, *tt.expectedNew.Spec.Replicas, got[tt.newRS.Name], "new replica set %s", tt.newRS.Name)
			}
			require.Len(t, tt.oldRSs, len(tt.expectedOld))
			for i, r := range tt.oldRSs {
				assert.Equal(t, *tt.expectedOld[i].Spec.Replicas, got[r.Name], "old replica set %s", r.Name)
			}
			for _, op := range plan.Scales {
				assert.NotContains(t, tt.untouched, op.ReplicaSet)
				assert.Equal(t, *tt.deployment.Spec.Replicas, op.DesiredReplicas)
				assert.Equal(t, *tt.deployment.Spec.Replicas+MaxSurge(*tt.deployment), op.MaxReplicas)
			}
		})
	}
}

func TestScaleAnnotationOnlyUpdate(t *testing.T) {
	// spec.replicas unchanged (10, surge now 2 instead of 1): sizes already
	// add up to 12 but the annotations are stale, so upstream's forced update
	// rewrites them without resizing.
	d := newDeployment("foo", 10, nil, intOrStr(2), nil, nil)
	a, b := rs("foo-a", 6, nil, metav1.NewTime(at(0))), rs("foo-b", 6, nil, metav1.NewTime(at(1)))
	SetReplicasAnnotations(a, 10, 11)
	SetReplicasAnnotations(b, 10, 11)
	plan := Scale(d, b, []*appsv1.ReplicaSet{a})
	assert.Equal(t, []ScaleOp{
		{ReplicaSet: "foo-a", From: 6, To: 6, DesiredReplicas: 10, MaxReplicas: 12, Reason: "Updated replica set foo-a annotations to desired-replicas=10 max-replicas=12"},
		{ReplicaSet: "foo-b", From: 6, To: 6, DesiredReplicas: 10, MaxReplicas: 12, Reason: "Updated replica set foo-b annotations to desired-replicas=10 max-replicas=12"},
	}, plan.Scales)
}

func TestScaleRecreateWithSeveralActive(t *testing.T) {
	// Proportional scaling is a RollingUpdate thing; Recreate leaves several
	// active ReplicaSets alone.
	d := newDeployment("foo", 10, nil, nil, nil, nil)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	plan := Scale(d, rs("foo-b", 3, nil, metav1.NewTime(at(1))), []*appsv1.ReplicaSet{rs("foo-a", 3, nil, metav1.NewTime(at(0)))})
	assert.Empty(t, plan.Scales)
}

func TestScaleReplicaSet(t *testing.T) {
	d := newDeployment("web", 3, nil, intOrStr(1), nil, nil)
	annotated := func(size int32, desired, maxReplicas int32) *appsv1.ReplicaSet {
		r := rs("web-1", size, nil, noTimestamp)
		SetReplicasAnnotations(r, desired, maxReplicas)
		return r
	}
	tests := []struct {
		name       string
		rs         *appsv1.ReplicaSet
		newScale   int32
		force      bool
		wantOp     *ScaleOp
		wantResize bool
	}{
		{"lazy, same size: nothing even if annotations are stale", annotated(3, 1, 1), 3, false, nil, false},
		{"lazy, grow", annotated(1, 3, 4), 3, false, &ScaleOp{ReplicaSet: "web-1", From: 1, To: 3, DesiredReplicas: 3, MaxReplicas: 4, Reason: "Scaled up replica set web-1 from 1 to 3"}, true},
		{"lazy, shrink", annotated(3, 3, 4), 0, false, &ScaleOp{ReplicaSet: "web-1", From: 3, To: 0, DesiredReplicas: 3, MaxReplicas: 4, Reason: "Scaled down replica set web-1 from 3 to 0"}, true},
		{"forced, same size, annotations fine: nothing", annotated(3, 3, 4), 3, true, nil, false},
		{"forced, same size, annotations stale: update without resize", annotated(3, 2, 3), 3, true, &ScaleOp{ReplicaSet: "web-1", From: 3, To: 3, DesiredReplicas: 3, MaxReplicas: 4, Reason: "Updated replica set web-1 annotations to desired-replicas=3 max-replicas=4"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op, resized := scaleReplicaSet(tt.rs, tt.newScale, d, tt.force)
			assert.Equal(t, tt.wantOp, op)
			assert.Equal(t, tt.wantResize, resized)
		})
	}
}

func TestScaleOpApplyTo(t *testing.T) {
	r := rs("web-1", 1, nil, noTimestamp)
	r.Annotations = map[string]string{"keep": "me"}
	before := r.DeepCopy()
	got := ScaleOp{ReplicaSet: "web-1", From: 1, To: 4, DesiredReplicas: 4, MaxReplicas: 5}.ApplyTo(r)
	assert.Equal(t, int32(4), *got.Spec.Replicas)
	assert.Equal(t, map[string]string{"keep": "me", DesiredReplicasAnnotation: "4", MaxReplicasAnnotation: "5"}, got.Annotations)
	assert.Equal(t, before, r, "input must not be mutated")
}

func TestPlanEmpty(t *testing.T) {
	tests := []struct {
		plan Plan
		want bool
	}{
		{Plan{}, true},
		{Plan{Step: StepWait, Message: "x", StatusChanged: true, RequeueAfter: time.Second}, true},
		{Plan{Create: &appsv1.ReplicaSet{}}, false},
		{Plan{Update: &appsv1.ReplicaSet{}}, false},
		{Plan{Scales: []ScaleOp{{}}}, false},
		{Plan{Deletes: []string{"x"}}, false},
		{Plan{Deployment: &appsv1.Deployment{}}, false},
	}
	for i, tt := range tests {
		assert.Equal(t, tt.want, tt.plan.Empty(), "case %d", i)
	}
}

func TestIsScalingEvent(t *testing.T) {
	d := newDeployment("foo", 5, nil, intOrStr(1), nil, map[string]string{"app": "foo"})
	newRSWith := func(name string, size int32, annotations map[string]string, image string) *appsv1.ReplicaSet {
		r := newReplicaSet(d, name, size)
		r.Annotations = annotations
		if image != "" {
			r.Spec.Template.Spec.Containers[0].Image = image
		}
		return r
	}
	tests := []struct {
		name   string
		rsList []*appsv1.ReplicaSet
		want   bool
	}{
		{"no replica sets", nil, false},
		{"annotation matches", []*appsv1.ReplicaSet{newRSWith("new", 5, map[string]string{DesiredReplicasAnnotation: "5"}, "")}, false},
		{"new replica set annotation differs", []*appsv1.ReplicaSet{newRSWith("new", 5, map[string]string{DesiredReplicasAnnotation: "4"}, "")}, true},
		{"old active replica set annotation differs", []*appsv1.ReplicaSet{
			newRSWith("new", 2, map[string]string{DesiredReplicasAnnotation: "5"}, ""),
			newRSWith("old", 3, map[string]string{DesiredReplicasAnnotation: "3"}, "old"),
		}, true},
		{"inactive replica set is ignored", []*appsv1.ReplicaSet{newRSWith("old", 0, map[string]string{DesiredReplicasAnnotation: "3"}, "old")}, false},
		{"missing or invalid annotation is ignored", []*appsv1.ReplicaSet{
			newRSWith("new", 5, nil, ""),
			newRSWith("old", 1, map[string]string{DesiredReplicasAnnotation: "-1"}, "old"),
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, IsScalingEvent(d, tt.rsList))
		})
	}
}

// TestCleanupDeployment is upstream's TestDeploymentController_cleanupDeployment.
func TestCleanupDeployment(t *testing.T) {
	selector := map[string]string{"foo": "bar"}
	alreadyDeleted := newRSWithStatus("foo-1", 0, 0, selector)
	alreadyDeleted.DeletionTimestamp = ptrTo(metav1.NewTime(at(0)))
	unobserved := newRSWithStatus("foo-2", 0, 0, selector)
	unobserved.Generation, unobserved.Status.ObservedGeneration = 3, 2

	tests := []struct {
		name                 string
		oldRSs               []*appsv1.ReplicaSet
		revisionHistoryLimit *int32
		expectedDeletions    []string
	}{
		{"limit 1 of 3", []*appsv1.ReplicaSet{newRSWithStatus("foo-1", 0, 0, selector), newRSWithStatus("foo-2", 0, 0, selector), newRSWithStatus("foo-3", 0, 0, selector)}, ptrTo(int32(1)), []string{"foo-1", "foo-2"}},
		{"only delete the replica set with Spec.Replicas = Status.Replicas = 0", []*appsv1.ReplicaSet{
			newRSWithStatus("foo-1", 0, 0, selector), newRSWithStatus("foo-2", 0, 1, selector), newRSWithStatus("foo-3", 1, 0, selector), newRSWithStatus("foo-4", 1, 1, selector),
		}, ptrTo(int32(0)), []string{"foo-1"}},
		{"limit 0 deletes all empty", []*appsv1.ReplicaSet{newRSWithStatus("foo-1", 0, 0, selector), newRSWithStatus("foo-2", 0, 0, selector)}, ptrTo(int32(0)), []string{"foo-1", "foo-2"}},
		{"nothing empty", []*appsv1.ReplicaSet{newRSWithStatus("foo-1", 1, 1, selector), newRSWithStatus("foo-2", 1, 1, selector)}, ptrTo(int32(0)), nil},
		{"already being deleted", []*appsv1.ReplicaSet{alreadyDeleted}, ptrTo(int32(0)), nil},
		{"with unlimited revisionHistoryLimit", []*appsv1.ReplicaSet{newRSWithStatus("foo-1", 0, 0, selector), newRSWithStatus("foo-2", 0, 0, selector), newRSWithStatus("foo-3", 0, 0, selector)}, ptrTo(int32(math.MaxInt32)), nil},
		// Ours.
		{"nil revisionHistoryLimit keeps everything", []*appsv1.ReplicaSet{newRSWithStatus("foo-1", 0, 0, selector)}, nil, nil},
		{"being-deleted ones do not count towards the limit", []*appsv1.ReplicaSet{alreadyDeleted, newRSWithStatus("foo-2", 0, 0, selector)}, ptrTo(int32(1)), nil},
		{"latest generation not observed yet", []*appsv1.ReplicaSet{unobserved}, ptrTo(int32(0)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDeployment("foo", 1, tt.revisionHistoryLimit, nil, nil, selector)
			before := deepCopies(tt.oldRSs)
			plan := CleanupDeployment(tt.oldRSs, d)
			assert.Equal(t, tt.expectedDeletions, plan.Deletes)
			if len(tt.expectedDeletions) > 0 {
				assert.Equal(t, StepCleanupHistory, plan.Step)
			} else {
				assert.True(t, plan.Empty())
			}
			requireUnchanged(t, before, tt.oldRSs)
		})
	}
}

// TestCleanupDeploymentOrder is upstream's
// TestDeploymentController_cleanupDeploymentOrder: lowest revisions go first
// and only the oldest len-limit are examined.
func TestCleanupDeploymentOrder(t *testing.T) {
	selector := map[string]string{"foo": "bar"}
	now := at(0)
	rsAt := func(name string, replicas int32, ts time.Time, revision string) *appsv1.ReplicaSet {
		r := rs(name, replicas, selector, metav1.NewTime(ts))
		if revision != "" {
			withRevision(r, revision)
		}
		r.Status = appsv1.ReplicaSetStatus{Replicas: replicas}
		return r
	}
	tests := []struct {
		name              string
		oldRSs            []*appsv1.ReplicaSet
		limit             int32
		expectedDeletions []string
	}{
		{"revision order: rs1 < rs2, delete rs1", []*appsv1.ReplicaSet{rsAt("foo-1", 0, now.Add(-time.Minute), "1"), rsAt("foo-2", 0, now, "2")}, 1, []string{"foo-1"}},
		{"revision order: rs2 < rs1, delete rs2", []*appsv1.ReplicaSet{rsAt("foo-1", 0, now.Add(-time.Minute), "2"), rsAt("foo-2", 0, now, "1")}, 1, []string{"foo-2"}},
		{"rs1 has revision but rs2 doesn't have revision, delete rs2", []*appsv1.ReplicaSet{rsAt("foo-1", 0, now.Add(-time.Minute), "1"), rsAt("foo-2", 0, now, "")}, 1, []string{"foo-2"}},
		{"rs1 doesn't have revision while rs2 has revision, delete rs1", []*appsv1.ReplicaSet{rsAt("foo-1", 0, now.Add(-time.Minute), ""), rsAt("foo-2", 0, now, "2")}, 1, []string{"foo-1"}},
		{"revision order: rs1 < rs2 < r3, but rs1 has replicas, delete rs2", []*appsv1.ReplicaSet{rsAt("foo-1", 1, now.Add(-time.Minute), "1"), rsAt("foo-2", 0, now, "2"), rsAt("foo-3", 0, now.Add(time.Minute), "3")}, 1, []string{"foo-2"}},
		{"revision order: rs1 < rs2 < r3, both rs1 && rs2 have replicas, don't delete", []*appsv1.ReplicaSet{rsAt("foo-1", 1, now.Add(-time.Minute), "1"), rsAt("foo-2", 1, now, "2"), rsAt("foo-3", 0, now.Add(time.Minute), "3")}, 1, nil},
		{"revision order: rs2 < rs4 < rs1 < rs3, delete rs2 && rs4", []*appsv1.ReplicaSet{
			rsAt("foo-1", 0, now.Add(-time.Minute), "3"), rsAt("foo-2", 0, now, "1"), rsAt("foo-3", 0, now.Add(time.Minute), "4"), rsAt("foo-4", 0, now.Add(2*time.Minute), "2"),
		}, 2, []string{"foo-2", "foo-4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDeployment("foo", 1, &tt.limit, nil, nil, selector)
			assert.Equal(t, tt.expectedDeletions, CleanupDeployment(tt.oldRSs, d).Deletes)
		})
	}
}

func TestHasRevisionHistoryLimit(t *testing.T) {
	for _, tt := range []struct {
		limit *int32
		want  bool
	}{{nil, false}, {ptrTo(int32(math.MaxInt32)), false}, {ptrTo(int32(0)), true}, {ptrTo(int32(10)), true}} {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{RevisionHistoryLimit: tt.limit}}
		assert.Equal(t, tt.want, HasRevisionHistoryLimit(d))
	}
}

func TestCalculateStatus(t *testing.T) {
	withStatus := func(name string, spec int32, status appsv1.ReplicaSetStatus) *appsv1.ReplicaSet {
		r := rs(name, spec, nil, noTimestamp)
		r.Status = status
		return r
	}
	oldCond := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: ReplicaSetUpdatedReason, LastUpdateTime: metav1.NewTime(at(0)), LastTransitionTime: metav1.NewTime(at(0))}
	availableCond := func(status corev1.ConditionStatus, reason, msg string) appsv1.DeploymentCondition {
		return appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: status, Reason: reason, Message: msg, LastUpdateTime: metav1.NewTime(at(5)), LastTransitionTime: metav1.NewTime(at(5))}
	}
	tests := []struct {
		name  string
		d     *appsv1.Deployment
		old   []*appsv1.ReplicaSet
		newRS *appsv1.ReplicaSet
		want  appsv1.DeploymentStatus
	}{
		{
			name: "mid rollout, minimum available",
			d: func() *appsv1.Deployment {
				d := newDeployment("foo", 4, nil, intOrStr(1), intOrStr(1), nil)
				d.Generation = 7
				d.Status.CollisionCount = ptrTo(int32(2))
				d.Status.Conditions = []appsv1.DeploymentCondition{oldCond}
				return d
			}(),
			old:   []*appsv1.ReplicaSet{withStatus("foo-old", 2, appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 2, ObservedGeneration: 1, TerminatingReplicas: ptrTo(int32(1))})},
			newRS: withStatus("foo-new", 3, appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 1, TerminatingReplicas: ptrTo(int32(0))}),
			want: appsv1.DeploymentStatus{
				ObservedGeneration: 7, Replicas: 6, UpdatedReplicas: 3, ReadyReplicas: 5, AvailableReplicas: 3, UnavailableReplicas: 2,
				TerminatingReplicas: ptrTo(int32(1)), CollisionCount: ptrTo(int32(2)),
				Conditions: []appsv1.DeploymentCondition{oldCond, availableCond(corev1.ConditionTrue, MinimumReplicasAvailable, "Deployment has minimum availability.")},
			},
		},
		{
			name:  "below minimum, no new replica set, more available than desired clamps unavailable at 0",
			d:     newDeployment("foo", 10, nil, intOrStr(1), intOrStr(1), nil),
			old:   []*appsv1.ReplicaSet{withStatus("foo-old", 2, appsv1.ReplicaSetStatus{Replicas: 5, AvailableReplicas: 5})},
			newRS: nil,
			want: appsv1.DeploymentStatus{
				Replicas: 5, UpdatedReplicas: 0, AvailableReplicas: 5, UnavailableReplicas: 0, TerminatingReplicas: ptrTo(int32(0)),
				Conditions: []appsv1.DeploymentCondition{availableCond(corev1.ConditionFalse, MinimumReplicasUnavailable, "Deployment does not have minimum availability.")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.d.DeepCopy()
			got := CalculateStatus(append(tt.old, tt.newRS), tt.newRS, tt.d, at(5))
			assert.Equal(t, tt.want, got)
			assert.Equal(t, before, tt.d)
			if got.CollisionCount != nil {
				assert.NotSame(t, tt.d.Status.CollisionCount, got.CollisionCount, "collision count must not alias the input")
			}
		})
	}
}

func TestNewReplicaSetFor(t *testing.T) {
	templates := hashTemplates(t)
	web := func(strategy appsv1.DeploymentStrategyType, collisionCount *int32) *appsv1.Deployment {
		d := newDeployment("web", 3, nil, pct("25%"), pct("25%"), map[string]string{"app": "web"})
		d.Spec.Template = templates["nginx"]
		d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}}
		d.Spec.MinReadySeconds = 5
		d.Annotations = map[string]string{"team": "a", RevisionAnnotation: "7", corev1.LastAppliedConfigAnnotation: "{}"}
		d.Status.CollisionCount = collisionCount
		if strategy == appsv1.RecreateDeploymentStrategyType {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: strategy}
		}
		return d
	}
	old := func() []*appsv1.ReplicaSet {
		a := withRevision(rs("web-old", 3, nil, noTimestamp), "4")
		b := withRevision(rs("web-older", 0, nil, noTimestamp), "2")
		return []*appsv1.ReplicaSet{a, b}
	}
	want := func(hash string, replicas int32, maxReplicas string) *appsv1.ReplicaSet {
		labels := map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}
		nginx := templates["nginx"]
		template := *nginx.DeepCopy()
		template.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}
		return &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{
				Name:      "web-" + hash,
				Namespace: metav1.NamespaceDefault,
				Labels:    labels,
				Annotations: map[string]string{
					"team": "a", RevisionAnnotation: "5", DesiredReplicasAnnotation: "3", MaxReplicasAnnotation: maxReplicas,
				},
			},
			Spec: appsv1.ReplicaSetSpec{
				Replicas:        ptrTo(replicas),
				MinReadySeconds: 5,
				Selector: &metav1.LabelSelector{
					MatchLabels:      map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}},
				},
				Template: template,
			},
		}
	}
	tests := []struct {
		name   string
		d      *appsv1.Deployment
		oldRSs []*appsv1.ReplicaSet
		want   *appsv1.ReplicaSet
	}{
		// Hashes are the upstream golden values of TestComputeHashMatchesUpstream.
		{"rolling: grows within surge (3 old pods, max 4 total)", web(appsv1.RollingUpdateDeploymentStrategyType, nil), old(), want("56ff5c7bd", 1, "4")},
		{"collision count changes the hash", web(appsv1.RollingUpdateDeploymentStrategyType, ptrTo(int32(1))), old(), want("7cf446dcb5", 1, "4")},
		{"recreate: full size", web(appsv1.RecreateDeploymentStrategyType, ptrTo(int32(0))), old(), want("66677bb76d", 3, "3")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, beforeOld := tt.d.DeepCopy(), deepCopies(tt.oldRSs)
			got, err := NewReplicaSetFor(tt.d, tt.oldRSs)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, before, tt.d)
			requireUnchanged(t, beforeOld, tt.oldRSs)
			assert.True(t, EqualIgnoreHash(&got.Spec.Template, &tt.d.Spec.Template))
		})
	}

	t.Run("first revision, no old replica sets", func(t *testing.T) {
		got, err := NewReplicaSetFor(web(appsv1.RollingUpdateDeploymentStrategyType, nil), nil)
		require.NoError(t, err)
		assert.Equal(t, "1", got.Annotations[RevisionAnnotation])
		assert.Equal(t, int32(3), *got.Spec.Replicas)
	})
	t.Run("invalid surge is an error", func(t *testing.T) {
		d := web(appsv1.RollingUpdateDeploymentStrategyType, nil)
		d.Spec.Strategy.RollingUpdate.MaxSurge = pct("lots")
		_, err := NewReplicaSetFor(d, nil)
		assert.Error(t, err)
	})
}

// TestReplicaSetName is upstream's TestGenerateReplicaSetName.
func TestReplicaSetName(t *testing.T) {
	tests := []struct {
		name           string
		deploymentName string
		hash           string
		want           string
	}{
		{"short name", "my-deployment", "abcde12345", "my-deployment-abcde12345"},
		{"maximum length without truncating", strings.Repeat("a", 242), "abcde12345", strings.Repeat("a", 242) + "-abcde12345"},
		{"very long deployment name is truncated", strings.Repeat("b", 250), "abcde12345", strings.Repeat("b", 242) + "-abcde12345"},
		{"very long hash is not truncated", strings.Repeat("d", 252), strings.Repeat("h", 252), strings.Repeat("d", 252) + "-" + strings.Repeat("h", 252)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, replicaSetName(tt.deploymentName, tt.hash))
		})
	}
}

func TestSyncExistingNewReplicaSet(t *testing.T) {
	d := newDeployment("web", 3, nil, nil, nil, map[string]string{"app": "web"})
	d.Annotations = map[string]string{"team": "a", RevisionAnnotation: "3"}
	d.Spec.MinReadySeconds = 10
	current := func(revision string, history string, minReady int32, extra map[string]string) *appsv1.ReplicaSet {
		r := newReplicaSet(d, "web-new", 3)
		r.Annotations = map[string]string{"team": "a", RevisionAnnotation: revision}
		if history != "" {
			r.Annotations[RevisionHistoryAnnotation] = history
		}
		for k, v := range extra {
			r.Annotations[k] = v
		}
		r.Spec.MinReadySeconds = minReady
		return r
	}
	oldRSs := []*appsv1.ReplicaSet{withRevision(rs("web-a", 0, nil, noTimestamp), "1"), withRevision(rs("web-b", 0, nil, noTimestamp), "2")}
	tests := []struct {
		name       string
		rs         *appsv1.ReplicaSet
		want       *appsv1.ReplicaSet
		wantUpdate bool
	}{
		{"up to date", current("3", "", 10, nil), current("3", "", 10, nil), false},
		{"revision ahead of the old ones is kept", current("9", "", 10, nil), current("9", "", 10, nil), false},
		{"reused by undo: revision bumped, old one kept in history", current("1", "", 10, nil), current("3", "1", 10, nil), true},
		{"history appended", current("2", "1", 10, nil), current("3", "1,2", 10, nil), true},
		{"min ready seconds synced", current("3", "", 0, nil), current("3", "", 10, nil), true},
		{"deployment annotation copied", func() *appsv1.ReplicaSet { r := current("3", "", 10, nil); delete(r.Annotations, "team"); return r }(), current("3", "", 10, nil), true},
		{"replicas annotations are not touched", current("3", "", 10, map[string]string{DesiredReplicasAnnotation: "1"}), current("3", "", 10, map[string]string{DesiredReplicasAnnotation: "1"}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.rs.DeepCopy()
			got, needsUpdate := SyncExistingNewReplicaSet(d, tt.rs, oldRSs)
			assert.Equal(t, tt.wantUpdate, needsUpdate)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, before, tt.rs, "input must not be mutated")
		})
	}
}
