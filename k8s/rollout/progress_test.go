package rollout

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newDeploymentStatus(replicas, updatedReplicas, availableReplicas int32) appsv1.DeploymentStatus {
	return appsv1.DeploymentStatus{Replicas: replicas, UpdatedReplicas: updatedReplicas, AvailableReplicas: availableReplicas}
}

// currentDeployment is upstream progress_test's helper (Recreate strategy).
func currentDeployment(pds *int32, replicas, statusReplicas, updatedReplicas, availableReplicas int32, conditions []appsv1.DeploymentCondition) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "progress-test"},
		Spec: appsv1.DeploymentSpec{
			ProgressDeadlineSeconds: pds,
			Replicas:                &replicas,
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		},
		Status: newDeploymentStatus(statusReplicas, updatedReplicas, availableReplicas),
	}
	d.Status.Conditions = conditions
	return d
}

func TestHasProgressDeadline(t *testing.T) {
	for _, tt := range []struct {
		pds  *int32
		want bool
	}{{nil, false}, {ptrTo(int32(math.MaxInt32)), false}, {ptrTo(int32(600)), true}, {ptrTo(int32(0)), true}} {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{ProgressDeadlineSeconds: tt.pds}}
		assert.Equal(t, tt.want, HasProgressDeadline(d))
	}
}

// TestDeploymentComplete is upstream's table plus the generation rule.
func TestDeploymentComplete(t *testing.T) {
	deployment := func(desired, current, updated, available, maxUnavailable, maxSurge int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			Spec: appsv1.DeploymentSpec{
				Replicas: &desired,
				Strategy: appsv1.DeploymentStrategy{
					RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: intOrStr(maxUnavailable), MaxSurge: intOrStr(maxSurge)},
					Type:          appsv1.RollingUpdateDeploymentStrategyType,
				},
			},
			Status: appsv1.DeploymentStatus{Replicas: current, UpdatedReplicas: updated, AvailableReplicas: available},
		}
	}
	unobserved := deployment(5, 5, 5, 5, 0, 0)
	unobserved.Generation = 2
	unobserved.Status.ObservedGeneration = 1

	tests := []struct {
		name     string
		d        *appsv1.Deployment
		expected bool
	}{
		{"not complete: min but not all pods become available", deployment(5, 5, 5, 4, 1, 0), false},
		{"not complete: min availability is not honored", deployment(5, 5, 5, 3, 1, 0), false},
		{"complete", deployment(5, 5, 5, 5, 0, 0), true},
		{"not complete: all pods are available but not updated", deployment(5, 5, 4, 5, 0, 0), false},
		{"not complete: still running old pods", deployment(1, 2, 1, 1, 0, 1), false},
		{"not complete: one replica deployment never comes up", deployment(1, 1, 1, 0, 1, 1), false},
		{"not complete: generation not observed", unobserved, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.expected, DeploymentComplete(tt.d, &tt.d.Status))
		})
	}
}

// TestDeploymentProgressing is upstream's table.
func TestDeploymentProgressing(t *testing.T) {
	deployment := func(current, updated, ready, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{Status: appsv1.DeploymentStatus{Replicas: current, UpdatedReplicas: updated, ReadyReplicas: ready, AvailableReplicas: available}}
	}
	newStatus := func(current, updated, ready, available int32) appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{Replicas: current, UpdatedReplicas: updated, ReadyReplicas: ready, AvailableReplicas: available}
	}
	tests := []struct {
		name      string
		d         *appsv1.Deployment
		newStatus appsv1.DeploymentStatus
		expected  bool
	}{
		{"progressing: updated pods", deployment(10, 4, 4, 4), newStatus(10, 6, 4, 4), true},
		{"not progressing", deployment(10, 4, 4, 4), newStatus(10, 4, 4, 4), false},
		{"progressing: old pods removed", deployment(10, 4, 6, 6), newStatus(8, 4, 6, 6), true},
		{"not progressing: less new pods", deployment(10, 7, 3, 3), newStatus(10, 6, 3, 3), false},
		{"progressing: less overall but more new pods", deployment(10, 4, 7, 7), newStatus(8, 8, 5, 5), true},
		{"progressing: more ready pods", deployment(10, 10, 9, 8), newStatus(10, 10, 10, 8), true},
		{"progressing: more available pods", deployment(10, 10, 10, 9), newStatus(10, 10, 10, 10), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.expected, DeploymentProgressing(tt.d, &tt.newStatus))
		})
	}
}

// TestDeploymentTimedOut is upstream's table; now is an argument.
func TestDeploymentTimedOut(t *testing.T) {
	var (
		null     *int32
		ten      = int32(10)
		infinite = int32(math.MaxInt32)
	)
	timeFn := func(min, sec int) time.Time { return time.Date(2016, 1, 1, 0, min, sec, 0, time.UTC) }
	deployment := func(condType appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason string, pds *int32, from time.Time) appsv1.Deployment {
		return appsv1.Deployment{
			Spec: appsv1.DeploymentSpec{ProgressDeadlineSeconds: pds},
			Status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
				{Type: condType, Status: status, Reason: reason, LastUpdateTime: metav1.Time{Time: from}},
			}},
		}
	}
	tests := []struct {
		name     string
		d        appsv1.Deployment
		now      time.Time
		expected bool
	}{
		{"nil progressDeadlineSeconds specified - no timeout", deployment(appsv1.DeploymentProgressing, corev1.ConditionTrue, "", null, timeFn(1, 9)), timeFn(1, 20), false},
		{"infinite progressDeadlineSeconds specified - no timeout", deployment(appsv1.DeploymentProgressing, corev1.ConditionTrue, "", &infinite, timeFn(1, 9)), timeFn(1, 20), false},
		{"progressDeadlineSeconds: 10s, now - started => 00:01:20 - 00:01:09 => 11s", deployment(appsv1.DeploymentProgressing, corev1.ConditionTrue, "", &ten, timeFn(1, 9)), timeFn(1, 20), true},
		{"progressDeadlineSeconds: 10s, now - started => 00:01:20 - 00:01:11 => 9s", deployment(appsv1.DeploymentProgressing, corev1.ConditionTrue, "", &ten, timeFn(1, 11)), timeFn(1, 20), false},
		{"previous status was a complete deployment", deployment(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewRSAvailableReason, nil, time.Time{}), time.Time{}, false},
		// Ours.
		{"exactly at the deadline is not timed out", deployment(appsv1.DeploymentProgressing, corev1.ConditionTrue, "", &ten, timeFn(1, 10)), timeFn(1, 20), false},
		{"complete deployment never times out", deployment(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewRSAvailableReason, &ten, timeFn(1, 0)), timeFn(9, 0), false},
		{"already timed out", deployment(appsv1.DeploymentProgressing, corev1.ConditionFalse, TimedOutReason, &ten, timeFn(1, 19)), timeFn(1, 20), true},
		{"no progressing condition", deployment(appsv1.DeploymentAvailable, corev1.ConditionTrue, "", &ten, timeFn(1, 0)), timeFn(9, 0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.expected, DeploymentTimedOut(&tt.d, &tt.d.Status, tt.now))
		})
	}
}

// TestRequeueStuckDeployment is upstream's table; now is an argument.
func TestRequeueStuckDeployment(t *testing.T) {
	pds := int32(60)
	infinite := int32(math.MaxInt32)
	failed := []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: TimedOutReason}}
	stuck := []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, LastUpdateTime: metav1.Date(2017, 2, 15, 18, 49, 0, 0, time.UTC)}}
	clock := func(sec, nsec int) time.Time {
		return time.Date(2017, 2, 15, 18, 49, 0, 0, time.UTC).Add(time.Duration(sec)*time.Second + time.Duration(nsec))
	}

	tests := []struct {
		name     string
		d        *appsv1.Deployment
		status   appsv1.DeploymentStatus
		now      time.Time
		expected time.Duration
	}{
		{"nil progressDeadlineSeconds specified", currentDeployment(nil, 4, 3, 3, 2, nil), newDeploymentStatus(3, 3, 2), clock(0, 0), -1},
		{"infinite progressDeadlineSeconds specified", currentDeployment(&infinite, 4, 3, 3, 2, nil), newDeploymentStatus(3, 3, 2), clock(0, 0), -1},
		{"no progressing condition found", currentDeployment(&pds, 4, 3, 3, 2, nil), newDeploymentStatus(3, 3, 2), clock(0, 0), -1},
		{"complete deployment does not need to be requeued", currentDeployment(&pds, 3, 3, 3, 3, nil), newDeploymentStatus(3, 3, 3), clock(0, 0), -1},
		{"already failed deployment does not need to be requeued", currentDeployment(&pds, 3, 3, 3, 0, failed), newDeploymentStatus(3, 3, 0), clock(0, 0), -1},
		{"stuck deployment - 30s", currentDeployment(&pds, 3, 3, 3, 1, stuck), newDeploymentStatus(3, 3, 1), clock(30, 0), 30 * time.Second},
		{"stuck deployment - 1s", currentDeployment(&pds, 3, 3, 3, 1, stuck), newDeploymentStatus(3, 3, 1), clock(59, 0), 1 * time.Second},
		{"failed deployment - less than a second => now", currentDeployment(&pds, 3, 3, 3, 1, stuck), newDeploymentStatus(3, 3, 1), clock(59, 1), 0},
		{"failed deployment - now", currentDeployment(&pds, 3, 3, 3, 1, stuck), newDeploymentStatus(3, 3, 1), clock(60, 0), 0},
		{"failed deployment - 1s after deadline", currentDeployment(&pds, 3, 3, 3, 1, stuck), newDeploymentStatus(3, 3, 1), clock(61, 0), 0},
		{"failed deployment - 60s after deadline", currentDeployment(&pds, 3, 3, 3, 1, stuck), newDeploymentStatus(3, 3, 1), clock(120, 0), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.expected, RequeueStuckDeployment(tt.d, tt.status, tt.now))
		})
	}
}

// TestSyncRolloutStatus is upstream's table with exact expectations: now is
// an argument, so both condition times are checked.
func TestSyncRolloutStatus(t *testing.T) {
	pds := int32(60)
	testTime := metav1.Date(2017, 2, 15, 18, 49, 0, 0, time.UTC)
	now := metav1.NewTime(testTime.Add(10 * time.Minute))
	failedTimedOut := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: TimedOutReason, LastUpdateTime: testTime, LastTransitionTime: testTime}
	newRSAvailable := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: NewRSAvailableReason, LastUpdateTime: testTime, LastTransitionTime: testTime}
	replicaSetUpdated := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: ReplicaSetUpdatedReason, LastUpdateTime: testTime, LastTransitionTime: testTime}

	progressing := func(status corev1.ConditionStatus, reason, msg string, lastUpdate, lastTransition metav1.Time) *appsv1.DeploymentCondition {
		return &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: status, Reason: reason, Message: msg, LastUpdateTime: lastUpdate, LastTransitionTime: lastTransition}
	}

	tests := []struct {
		name   string
		d      *appsv1.Deployment
		allRSs []*appsv1.ReplicaSet
		newRS  *appsv1.ReplicaSet
		want   *appsv1.DeploymentCondition // nil: no Progressing condition
	}{
		{
			name:   "General: remove Progressing condition and do not estimate progress if deployment has no Progress Deadline",
			d:      currentDeployment(nil, 3, 2, 2, 2, []appsv1.DeploymentCondition{replicaSetUpdated}),
			allRSs: []*appsv1.ReplicaSet{newRSWithAvailable("bar", 0, 1, 1)},
			newRS:  newRSWithAvailable("foo", 3, 2, 2),
			want:   nil,
		},
		{
			name:   "General: do not estimate progress of deployment with only one active ReplicaSet",
			d:      currentDeployment(&pds, 3, 3, 3, 3, []appsv1.DeploymentCondition{newRSAvailable}),
			allRSs: []*appsv1.ReplicaSet{newRSWithAvailable("bar", 3, 3, 3)},
			want:   &newRSAvailable,
		},
		{
			name:   "DeploymentProgressing: dont update lastTransitionTime if deployment already has Progressing=True",
			d:      currentDeployment(&pds, 3, 2, 2, 2, []appsv1.DeploymentCondition{replicaSetUpdated}),
			allRSs: []*appsv1.ReplicaSet{newRSWithAvailable("bar", 0, 1, 1)},
			newRS:  newRSWithAvailable("foo", 3, 2, 2),
			want:   progressing(corev1.ConditionTrue, ReplicaSetUpdatedReason, `ReplicaSet "foo" is progressing.`, now, testTime),
		},
		{
			name:   "DeploymentProgressing: update everything if deployment has Progressing=False",
			d:      currentDeployment(&pds, 3, 2, 2, 2, []appsv1.DeploymentCondition{failedTimedOut}),
			allRSs: []*appsv1.ReplicaSet{newRSWithAvailable("bar", 0, 1, 1)},
			newRS:  newRSWithAvailable("foo", 3, 2, 2),
			want:   progressing(corev1.ConditionTrue, ReplicaSetUpdatedReason, `ReplicaSet "foo" is progressing.`, now, now),
		},
		{
			name:   "DeploymentProgressing: create Progressing condition if it does not exist",
			d:      currentDeployment(&pds, 3, 2, 2, 2, []appsv1.DeploymentCondition{}),
			allRSs: []*appsv1.ReplicaSet{newRSWithAvailable("bar", 0, 1, 1)},
			newRS:  newRSWithAvailable("foo", 3, 2, 2),
			want:   progressing(corev1.ConditionTrue, ReplicaSetUpdatedReason, `ReplicaSet "foo" is progressing.`, now, now),
		},
		{
			name:   "DeploymentComplete: dont update lastTransitionTime if deployment already has Progressing=True",
			d:      currentDeployment(&pds, 3, 3, 3, 3, []appsv1.DeploymentCondition{replicaSetUpdated}),
			allRSs: []*appsv1.ReplicaSet{},
			newRS:  newRSWithAvailable("foo", 3, 3, 3),
			want:   progressing(corev1.ConditionTrue, NewRSAvailableReason, `ReplicaSet "foo" has successfully progressed.`, now, testTime),
		},
		{
			name:   "DeploymentComplete: update everything if deployment has Progressing=False",
			d:      currentDeployment(&pds, 3, 3, 3, 3, []appsv1.DeploymentCondition{failedTimedOut}),
			allRSs: []*appsv1.ReplicaSet{},
			newRS:  newRSWithAvailable("foo", 3, 3, 3),
			want:   progressing(corev1.ConditionTrue, NewRSAvailableReason, `ReplicaSet "foo" has successfully progressed.`, now, now),
		},
		{
			name:   "DeploymentComplete: create Progressing condition if it does not exist",
			d:      currentDeployment(&pds, 3, 3, 3, 3, []appsv1.DeploymentCondition{}),
			allRSs: []*appsv1.ReplicaSet{},
			newRS:  newRSWithAvailable("foo", 3, 3, 3),
			want:   progressing(corev1.ConditionTrue, NewRSAvailableReason, `ReplicaSet "foo" has successfully progressed.`, now, now),
		},
		{
			name:   "DeploymentComplete: defend against NPE when newRS=nil",
			d:      currentDeployment(&pds, 0, 3, 3, 3, []appsv1.DeploymentCondition{replicaSetUpdated}),
			allRSs: []*appsv1.ReplicaSet{newRSWithAvailable("foo", 0, 0, 0)},
			want:   progressing(corev1.ConditionTrue, NewRSAvailableReason, `Deployment "progress-test" has successfully progressed.`, now, testTime),
		},
		{
			name:   "DeploymentTimedOut: update status if rollout exceeds Progress Deadline",
			d:      currentDeployment(&pds, 3, 2, 2, 2, []appsv1.DeploymentCondition{replicaSetUpdated}),
			allRSs: []*appsv1.ReplicaSet{},
			newRS:  newRSWithAvailable("foo", 3, 2, 2),
			want:   progressing(corev1.ConditionFalse, TimedOutReason, `ReplicaSet "foo" has timed out progressing.`, now, now),
		},
		{
			name:   "DeploymentTimedOut: do not update status if deployment has existing timedOut condition",
			d:      currentDeployment(&pds, 3, 2, 2, 2, []appsv1.DeploymentCondition{failedTimedOut}),
			allRSs: []*appsv1.ReplicaSet{},
			newRS:  newRSWithAvailable("foo", 3, 2, 2),
			want:   &failedTimedOut,
		},
		// Ours.
		{
			name:   "No progress within the deadline: condition unchanged",
			d:      currentDeployment(&pds, 3, 2, 2, 2, []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: ReplicaSetUpdatedReason, LastUpdateTime: now, LastTransitionTime: testTime}}),
			allRSs: []*appsv1.ReplicaSet{},
			newRS:  newRSWithAvailable("foo", 3, 2, 2),
			want:   progressing(corev1.ConditionTrue, ReplicaSetUpdatedReason, "", now, testTime),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allRSs := tt.allRSs
			if tt.newRS != nil {
				allRSs = append(allRSs, tt.newRS)
			}
			before := tt.d.DeepCopy()
			status := SyncRolloutStatus(allRSs, tt.newRS, tt.d, now.Time)
			assert.Equal(t, tt.want, GetDeploymentCondition(status, appsv1.DeploymentProgressing))
			assert.Equal(t, before, tt.d, "deployment must not be mutated")
		})
	}
}

func TestSyncRolloutStatusReplicaFailure(t *testing.T) {
	pds := int32(60)
	failure := func(reason string) appsv1.ReplicaSetCondition {
		return appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(at(0))}
	}
	withFailure := func(r *appsv1.ReplicaSet, reason string) *appsv1.ReplicaSet {
		r.Status.Conditions = append(r.Status.Conditions, failure(reason))
		return r
	}
	existing := appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "Old"}
	tests := []struct {
		name       string
		d          *appsv1.Deployment
		oldRSs     []*appsv1.ReplicaSet
		newRS      *appsv1.ReplicaSet
		wantReason string // "" means no ReplicaFailure condition
	}{
		{"no failure, none before", currentDeployment(&pds, 3, 3, 3, 3, nil), nil, newRSWithAvailable("new", 3, 3, 3), ""},
		{"no failure removes stale condition", currentDeployment(&pds, 3, 3, 3, 3, []appsv1.DeploymentCondition{existing}), nil, newRSWithAvailable("new", 3, 3, 3), ""},
		{"old replica set failure", currentDeployment(&pds, 3, 3, 3, 3, nil), []*appsv1.ReplicaSet{withFailure(newRSWithAvailable("old", 1, 1, 1), "OldQuota")}, newRSWithAvailable("new", 3, 3, 3), "OldQuota"},
		{"new replica set failure wins", currentDeployment(&pds, 3, 3, 3, 3, nil), []*appsv1.ReplicaSet{withFailure(newRSWithAvailable("old", 1, 1, 1), "OldQuota")}, withFailure(newRSWithAvailable("new", 3, 2, 2), "NewQuota"), "NewQuota"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := SyncRolloutStatus(append(tt.oldRSs, tt.newRS), tt.newRS, tt.d, at(1))
			cond := GetDeploymentCondition(status, appsv1.DeploymentReplicaFailure)
			if tt.wantReason == "" {
				assert.Nil(t, cond)
				return
			}
			require.NotNil(t, cond)
			assert.Equal(t, tt.wantReason, cond.Reason)
			assert.Equal(t, metav1.NewTime(at(0)), cond.LastUpdateTime)
		})
	}
}

// TestSyncRolloutStatusRollingAvailability checks the Available condition
// threshold for a rolling Deployment (maxUnavailable 1 of 4).
func TestSyncRolloutStatusRollingAvailability(t *testing.T) {
	d := newDeployment("foo", 4, nil, intOrStr(1), intOrStr(1), nil)
	for _, tt := range []struct {
		available  int32
		wantStatus corev1.ConditionStatus
		wantReason string
	}{
		{2, corev1.ConditionFalse, MinimumReplicasUnavailable},
		{3, corev1.ConditionTrue, MinimumReplicasAvailable},
		{4, corev1.ConditionTrue, MinimumReplicasAvailable},
	} {
		newRS := newRSWithAvailable("foo-1", 4, 4, tt.available)
		status := SyncRolloutStatus([]*appsv1.ReplicaSet{newRS}, newRS, d, at(0))
		cond := GetDeploymentCondition(status, appsv1.DeploymentAvailable)
		require.NotNil(t, cond)
		assert.Equal(t, tt.wantStatus, cond.Status, "available=%d", tt.available)
		assert.Equal(t, tt.wantReason, cond.Reason, "available=%d", tt.available)
	}
}
