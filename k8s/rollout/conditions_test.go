package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	condProgressing = func() appsv1.DeploymentCondition {
		return appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ForSomeReason"}
	}
	condProgressing2 = func() appsv1.DeploymentCondition {
		return appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "BecauseItIs"}
	}
	condAvailable = func() appsv1.DeploymentCondition {
		return appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "AwesomeController"}
	}
	exampleStatus = func() *appsv1.DeploymentStatus {
		return &appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{condProgressing(), condAvailable()}}
	}
)

func TestNewDeploymentCondition(t *testing.T) {
	got := NewDeploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, MinimumReplicasAvailable, "msg", at(3))
	assert.Equal(t, &appsv1.DeploymentCondition{
		Type:               appsv1.DeploymentAvailable,
		Status:             corev1.ConditionTrue,
		LastUpdateTime:     metav1.NewTime(at(3)),
		LastTransitionTime: metav1.NewTime(at(3)),
		Reason:             MinimumReplicasAvailable,
		Message:            "msg",
	}, got)
}

// TestGetCondition is upstream's TestGetCondition.
func TestGetCondition(t *testing.T) {
	tests := []struct {
		name     string
		status   appsv1.DeploymentStatus
		condType appsv1.DeploymentConditionType
		expected bool
	}{
		{"condition exists", *exampleStatus(), appsv1.DeploymentAvailable, true},
		{"condition does not exist", *exampleStatus(), appsv1.DeploymentReplicaFailure, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cond := GetDeploymentCondition(tt.status, tt.condType)
			assert.Equal(t, tt.expected, cond != nil)
			if cond != nil {
				cond.Reason = "changed"
				assert.NotEqual(t, "changed", GetDeploymentCondition(tt.status, tt.condType).Reason, "a copy is returned")
			}
		})
	}
}

// TestSetCondition is upstream's TestSetCondition plus the transition-time
// and no-op rules.
func TestSetCondition(t *testing.T) {
	t1, t2 := metav1.NewTime(at(1)), metav1.NewTime(at(2))
	progressing := func(status corev1.ConditionStatus, reason string, ts metav1.Time) appsv1.DeploymentCondition {
		return appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: status, Reason: reason, LastUpdateTime: ts, LastTransitionTime: ts}
	}
	tests := []struct {
		name           string
		status         *appsv1.DeploymentStatus
		cond           appsv1.DeploymentCondition
		expectedStatus *appsv1.DeploymentStatus
	}{
		{"set for the first time", &appsv1.DeploymentStatus{}, condAvailable(),
			&appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{condAvailable()}}},
		{"simple set", &appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{condProgressing()}}, condAvailable(),
			exampleStatus()},
		{"overwrite", &appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{condProgressing()}}, condProgressing2(),
			&appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{condProgressing2()}}},
		{"same status and reason: nothing changes, not even times",
			&appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{progressing(corev1.ConditionTrue, "A", t1)}},
			progressing(corev1.ConditionTrue, "A", t2),
			&appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{progressing(corev1.ConditionTrue, "A", t1)}}},
		{"same status, new reason: transition time kept",
			&appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{progressing(corev1.ConditionTrue, "A", t1)}},
			progressing(corev1.ConditionTrue, "B", t2),
			&appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "B", LastUpdateTime: t2, LastTransitionTime: t1}}}},
		{"replaced condition moves to the end",
			&appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{condProgressing(), condAvailable()}},
			condProgressing2(),
			&appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{condAvailable(), condProgressing2()}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetDeploymentCondition(tt.status, tt.cond)
			assert.Equal(t, tt.expectedStatus, tt.status)
		})
	}
}

// TestRemoveCondition is upstream's TestRemoveCondition.
func TestRemoveCondition(t *testing.T) {
	tests := []struct {
		name           string
		status         *appsv1.DeploymentStatus
		condType       appsv1.DeploymentConditionType
		expectedStatus *appsv1.DeploymentStatus
	}{
		{"remove from empty status", &appsv1.DeploymentStatus{}, appsv1.DeploymentProgressing, &appsv1.DeploymentStatus{}},
		{"simple remove", &appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{condProgressing()}}, appsv1.DeploymentProgressing, &appsv1.DeploymentStatus{}},
		{"doesn't remove anything", exampleStatus(), appsv1.DeploymentReplicaFailure, exampleStatus()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			RemoveDeploymentCondition(tt.status, tt.condType)
			assert.Equal(t, tt.expectedStatus, tt.status)
		})
	}
}

func TestReplicaSetToDeploymentCondition(t *testing.T) {
	ts := metav1.NewTime(at(5))
	got := ReplicaSetToDeploymentCondition(appsv1.ReplicaSetCondition{
		Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, LastTransitionTime: ts, Reason: "FailedCreate", Message: "quota",
	})
	assert.Equal(t, appsv1.DeploymentCondition{
		Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, LastUpdateTime: ts, LastTransitionTime: ts, Reason: "FailedCreate", Message: "quota",
	}, got)
}
