package rollout

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons the Deployment controller puts on Deployment conditions and events
// (upstream pkg/controller/deployment/util).
const (
	// Progressing condition reasons.

	// ReplicaSetUpdatedReason: a ReplicaSet was scaled as part of the rollout.
	ReplicaSetUpdatedReason = "ReplicaSetUpdated"
	// FailedRSCreateReason: the new ReplicaSet could not be created.
	FailedRSCreateReason = "ReplicaSetCreateError"
	// NewReplicaSetReason: the new ReplicaSet was created.
	NewReplicaSetReason = "NewReplicaSetCreated"
	// FoundNewRSReason: an existing ReplicaSet was found to be the new one.
	FoundNewRSReason = "FoundNewReplicaSet"
	// NewRSAvailableReason: the new ReplicaSet is complete and available.
	NewRSAvailableReason = "NewReplicaSetAvailable"
	// TimedOutReason: no progress within progressDeadlineSeconds.
	TimedOutReason = "ProgressDeadlineExceeded"
	// PausedDeployReason: the Deployment is paused; progress is not estimated.
	PausedDeployReason = "DeploymentPaused"
	// ResumedDeployReason: the Deployment was resumed; the deadline restarts.
	ResumedDeployReason = "DeploymentResumed"

	// Available condition reasons.

	// MinimumReplicasAvailable: at least spec.replicas-maxUnavailable pods are available.
	MinimumReplicasAvailable = "MinimumReplicasAvailable"
	// MinimumReplicasUnavailable: fewer than spec.replicas-maxUnavailable pods are available.
	MinimumReplicasUnavailable = "MinimumReplicasUnavailable"

	// Rollback event reasons.

	// RollbackRevisionNotFound: the revision to roll back to does not exist.
	RollbackRevisionNotFound = "DeploymentRollbackRevisionNotFound"
	// RollbackTemplateUnchanged: the revision has the Deployment's current template.
	RollbackTemplateUnchanged = "DeploymentRollbackTemplateUnchanged"
	// RollbackDone: the Deployment's template was rolled back.
	RollbackDone = "DeploymentRollback"
)

// NewDeploymentCondition returns a condition whose transition and update
// times are now (upstream NewDeploymentCondition, which uses metav1.Now()).
func NewDeploymentCondition(condType appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) *appsv1.DeploymentCondition {
	ts := metav1.NewTime(now)
	return &appsv1.DeploymentCondition{
		Type:               condType,
		Status:             status,
		LastUpdateTime:     ts,
		LastTransitionTime: ts,
		Reason:             reason,
		Message:            message,
	}
}

// GetDeploymentCondition returns a copy of the condition of the given type, or
// nil (upstream GetDeploymentCondition).
func GetDeploymentCondition(status appsv1.DeploymentStatus, condType appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for _, c := range status.Conditions {
		if c.Type == condType {
			return &c
		}
	}
	return nil
}

// SetDeploymentCondition puts condition into status, replacing any condition
// of the same type. Nothing changes when one with the same status and reason
// is already there; when only the reason differs the old
// lastTransitionTime is kept (upstream SetDeploymentCondition). The replaced
// condition moves to the end of the list, as upstream.
func SetDeploymentCondition(status *appsv1.DeploymentStatus, condition appsv1.DeploymentCondition) {
	current := GetDeploymentCondition(*status, condition.Type)
	if current != nil && current.Status == condition.Status && current.Reason == condition.Reason {
		return
	}
	if current != nil && current.Status == condition.Status {
		condition.LastTransitionTime = current.LastTransitionTime
	}
	status.Conditions = append(withoutCondition(status.Conditions, condition.Type), condition)
}

// RemoveDeploymentCondition drops the condition of the given type (upstream
// RemoveDeploymentCondition).
func RemoveDeploymentCondition(status *appsv1.DeploymentStatus, condType appsv1.DeploymentConditionType) {
	status.Conditions = withoutCondition(status.Conditions, condType)
}

// withoutCondition returns a new slice without conditions of condType; nil
// when nothing is left.
func withoutCondition(conditions []appsv1.DeploymentCondition, condType appsv1.DeploymentConditionType) []appsv1.DeploymentCondition {
	var out []appsv1.DeploymentCondition
	for _, c := range conditions {
		if c.Type != condType {
			out = append(out, c)
		}
	}
	return out
}

// ReplicaSetToDeploymentCondition turns a ReplicaSet condition (e.g.
// ReplicaFailure) into the equivalent Deployment condition (upstream
// ReplicaSetToDeploymentCondition).
func ReplicaSetToDeploymentCondition(cond appsv1.ReplicaSetCondition) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{
		Type:               appsv1.DeploymentConditionType(cond.Type),
		Status:             cond.Status,
		LastTransitionTime: cond.LastTransitionTime,
		LastUpdateTime:     cond.LastTransitionTime,
		Reason:             cond.Reason,
		Message:            cond.Message,
	}
}
