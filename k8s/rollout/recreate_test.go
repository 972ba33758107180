package rollout

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestScaleDownOldReplicaSets is upstream's TestScaleDownOldReplicaSets
// (scaleDownOldReplicaSetsForRecreate).
func TestScaleDownOldReplicaSets(t *testing.T) {
	tests := []struct {
		oldRSSizes []int32
		d          *appsv1.Deployment
	}{
		{[]int32{3}, newDeployment("foo", 3, nil, nil, nil, map[string]string{"foo": "bar"})},
		// Ours.
		{[]int32{3, 0, 1}, newDeployment("foo", 3, nil, nil, nil, map[string]string{"foo": "bar"})},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var oldRSs []*appsv1.ReplicaSet
			for n, size := range tt.oldRSSizes {
				oldRSs = append(oldRSs, newReplicaSet(tt.d, fmt.Sprintf("%s-%d", tt.d.Name, n), size))
			}
			ops := scaleDownOldReplicaSetsForRecreate(oldRSs, tt.d)
			for name, size := range sizesAfter(oldRSs, ops) {
				assert.Zero(t, size, "rs %q has non-zero replicas", name)
			}
			for _, op := range ops {
				assert.NotZero(t, op.From, "empty replica sets are not touched")
			}
		})
	}
}

func rsWithUID(uid string) *appsv1.ReplicaSet {
	d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
	r := newReplicaSet(d, "foo-"+uid, 0)
	r.UID = types.UID(uid)
	return r
}

func podMapWithUIDs(uids []string) map[types.UID][]*corev1.Pod {
	podMap := map[types.UID][]*corev1.Pod{}
	for _, uid := range uids {
		podMap[types.UID(uid)] = []*corev1.Pod{{}, {}}
	}
	return podMap
}

func podsInPhase(phases ...corev1.PodPhase) []*corev1.Pod {
	var pods []*corev1.Pod
	for _, p := range phases {
		pods = append(pods, &corev1.Pod{Status: corev1.PodStatus{Phase: p}})
	}
	return pods
}

// TestOldPodsRunning is upstream's TestOldPodsRunning.
func TestOldPodsRunning(t *testing.T) {
	tests := []struct {
		name              string
		newRS             *appsv1.ReplicaSet
		oldRSs            []*appsv1.ReplicaSet
		podMap            map[types.UID][]*corev1.Pod
		hasOldPodsRunning bool
	}{
		{name: "no old RSs", hasOldPodsRunning: false},
		{name: "old RSs with running pods", oldRSs: []*appsv1.ReplicaSet{rsWithUID("some-uid"), rsWithUID("other-uid")}, podMap: podMapWithUIDs([]string{"some-uid", "other-uid"}), hasOldPodsRunning: true},
		{name: "old RSs without pods but with non-zero status replicas", oldRSs: []*appsv1.ReplicaSet{newRSWithStatus("rs-1", 0, 1, nil)}, hasOldPodsRunning: true},
		{name: "old RSs without pods or non-zero status replicas", oldRSs: []*appsv1.ReplicaSet{newRSWithStatus("rs-1", 0, 0, nil)}, hasOldPodsRunning: false},
		{name: "old RSs with zero status replicas but pods in terminal state are present", oldRSs: []*appsv1.ReplicaSet{newRSWithStatus("rs-1", 0, 0, nil)},
			podMap: map[types.UID][]*corev1.Pod{"uid-1": podsInPhase(corev1.PodFailed, corev1.PodSucceeded)}, hasOldPodsRunning: false},
		{name: "old RSs with zero status replicas but pod in unknown phase present", oldRSs: []*appsv1.ReplicaSet{newRSWithStatus("rs-1", 0, 0, nil)},
			podMap: map[types.UID][]*corev1.Pod{"uid-1": podsInPhase(corev1.PodUnknown)}, hasOldPodsRunning: true},
		{name: "old RSs with zero status replicas with pending pod present", oldRSs: []*appsv1.ReplicaSet{newRSWithStatus("rs-1", 0, 0, nil)},
			podMap: map[types.UID][]*corev1.Pod{"uid-1": podsInPhase(corev1.PodPending)}, hasOldPodsRunning: true},
		{name: "old RSs with zero status replicas with running pod present", oldRSs: []*appsv1.ReplicaSet{newRSWithStatus("rs-1", 0, 0, nil)},
			podMap: map[types.UID][]*corev1.Pod{"uid-1": podsInPhase(corev1.PodRunning)}, hasOldPodsRunning: true},
		{name: "old RSs with zero status replicas but pods in terminal state and pending are present", oldRSs: []*appsv1.ReplicaSet{newRSWithStatus("rs-1", 0, 0, nil)},
			podMap: map[types.UID][]*corev1.Pod{
				"uid-1": podsInPhase(corev1.PodFailed, corev1.PodSucceeded),
				"uid-2": {},
				"uid-3": podsInPhase(corev1.PodPending),
			}, hasOldPodsRunning: true},
		// Ours.
		{name: "pods of the new replica set do not count", newRS: rsWithUID("new-uid"),
			podMap: map[types.UID][]*corev1.Pod{"new-uid": podsInPhase(corev1.PodRunning)}, hasOldPodsRunning: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.hasOldPodsRunning, OldPodsRunning(tt.newRS, tt.oldRSs, tt.podMap))
		})
	}
}

func TestRolloutRecreate(t *testing.T) {
	d0 := func(status appsv1.DeploymentStatus) *appsv1.Deployment {
		d := newDeployment("web", 3, ptrTo(int32(1)), nil, nil, map[string]string{"app": "web"})
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		d.Status = status
		return d
	}
	old := func(d *appsv1.Deployment, name string, size, statusReplicas int32, m int) *appsv1.ReplicaSet {
		r := newReplicaSet(d, name, size)
		r.Spec.Template.Spec.Containers[0].Image = "foo/bar:" + name
		r.CreationTimestamp = metav1.NewTime(at(m))
		r.Status.Replicas = statusReplicas
		return withRevision(r, fmt.Sprint(m+1))
	}
	current := func(d *appsv1.Deployment, size, available int32) *appsv1.ReplicaSet {
		r := newReplicaSet(d, "web-new", size)
		r.CreationTimestamp = metav1.NewTime(at(9))
		r.Status = appsv1.ReplicaSetStatus{Replicas: size, AvailableReplicas: available}
		return withRevision(r, "9")
	}
	completeStatus := appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}

	tests := []struct {
		name           string
		d              *appsv1.Deployment
		newRS          func(*appsv1.Deployment) *appsv1.ReplicaSet
		oldRSs         func(*appsv1.Deployment) []*appsv1.ReplicaSet
		oldPodsRunning bool
		wantStep       Step
		wantCreate     bool
		wantSizes      map[string]int32
		wantOps        int
		wantDeletes    []string
	}{
		{
			name:  "active old replica sets go to 0 first, even if the new one exists",
			d:     d0(appsv1.DeploymentStatus{}),
			newRS: func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, 0, 0) },
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 2, 2, 0), old(d, "web-b", 0, 0, 1), old(d, "web-c", 1, 1, 2)}
			},
			wantStep:  StepRecreateScaleDownOld,
			wantSizes: map[string]int32{"web-a": 0, "web-b": 0, "web-c": 0, "web-new": 0},
			wantOps:   2,
		},
		{
			name:      "old replica sets still report pods: wait",
			d:         d0(appsv1.DeploymentStatus{}),
			oldRSs:    func(d *appsv1.Deployment) []*appsv1.ReplicaSet { return []*appsv1.ReplicaSet{old(d, "web-a", 0, 2, 0)} },
			wantStep:  StepRecreateWaitOldPodsGone,
			wantSizes: map[string]int32{"web-a": 0},
		},
		{
			name:           "caller still sees old pods: wait",
			d:              d0(appsv1.DeploymentStatus{}),
			oldRSs:         func(d *appsv1.Deployment) []*appsv1.ReplicaSet { return []*appsv1.ReplicaSet{old(d, "web-a", 0, 0, 0)} },
			oldPodsRunning: true,
			wantStep:       StepRecreateWaitOldPodsGone,
		},
		{
			name:       "old pods gone: create the new replica set at full size",
			d:          d0(appsv1.DeploymentStatus{}),
			oldRSs:     func(d *appsv1.Deployment) []*appsv1.ReplicaSet { return []*appsv1.ReplicaSet{old(d, "web-a", 0, 0, 0)} },
			wantStep:   StepRecreateScaleUpNew,
			wantCreate: true,
		},
		{
			name:      "old pods gone: scale up the existing new replica set",
			d:         d0(appsv1.DeploymentStatus{}),
			newRS:     func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, 0, 0) },
			oldRSs:    func(d *appsv1.Deployment) []*appsv1.ReplicaSet { return []*appsv1.ReplicaSet{old(d, "web-a", 0, 0, 0)} },
			wantStep:  StepRecreateScaleUpNew,
			wantSizes: map[string]int32{"web-new": 3},
			wantOps:   1,
		},
		{
			name:     "scaled up, pods not available yet",
			d:        d0(appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 1}),
			newRS:    func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, 3, 1) },
			oldRSs:   func(d *appsv1.Deployment) []*appsv1.ReplicaSet { return []*appsv1.ReplicaSet{old(d, "web-a", 0, 0, 0)} },
			wantStep: StepWait,
		},
		{
			name:  "complete: history cleanup",
			d:     d0(completeStatus),
			newRS: func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, 3, 3) },
			oldRSs: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{old(d, "web-a", 0, 0, 0), old(d, "web-b", 0, 0, 1)}
			},
			wantStep:    StepCleanupHistory,
			wantDeletes: []string{"web-a"},
		},
		{
			name:     "complete",
			d:        d0(completeStatus),
			newRS:    func(d *appsv1.Deployment) *appsv1.ReplicaSet { return current(d, 3, 3) },
			oldRSs:   func(d *appsv1.Deployment) []*appsv1.ReplicaSet { return []*appsv1.ReplicaSet{old(d, "web-a", 0, 0, 0)} },
			wantStep: StepComplete,
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
			before := deepCopies(all)

			plan, err := RolloutRecreate(tt.d, newRS, oldRSs, tt.oldPodsRunning)
			require.NoError(t, err)
			requireUnchanged(t, before, all)

			assert.Equal(t, tt.wantStep, plan.Step)
			assert.Len(t, plan.Scales, tt.wantOps)
			assert.Equal(t, tt.wantDeletes, plan.Deletes)
			if tt.wantCreate {
				require.NotNil(t, plan.Create)
				assert.Equal(t, int32(3), *plan.Create.Spec.Replicas)
				assert.Equal(t, map[string]string{RevisionAnnotation: "2", DesiredReplicasAnnotation: "3", MaxReplicasAnnotation: "3"}, plan.Create.Annotations)
			} else {
				assert.Nil(t, plan.Create)
			}
			got := sizesAfter(all, plan.Scales)
			for name, size := range tt.wantSizes {
				assert.Equal(t, size, got[name], name)
			}
		})
	}
}

func TestRolloutRecreateHashCollision(t *testing.T) {
	d := newDeployment("web", 3, nil, nil, nil, map[string]string{"app": "web"})
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	wanted, err := NewReplicaSetFor(d, nil)
	require.NoError(t, err)
	squatter := newReplicaSet(d, wanted.Name, 0)
	squatter.Spec.Template.Labels = map[string]string{"app": "web", "other": "template"}

	plan, err := RolloutRecreate(d, nil, []*appsv1.ReplicaSet{squatter}, false)
	require.NoError(t, err)
	assert.Equal(t, StepHashCollision, plan.Step)
	assert.True(t, plan.Empty())
}
