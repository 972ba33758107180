package rollout

import (
	"fmt"
	"math"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// HasProgressDeadline reports whether progressDeadlineSeconds is set to a
// finite value, i.e. whether Progressing conditions are maintained (upstream
// HasProgressDeadline).
func HasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// DeploymentComplete reports whether newStatus shows every desired replica
// updated and available, no old pods left, and the current generation
// observed (upstream DeploymentComplete).
func DeploymentComplete(deployment *appsv1.Deployment, newStatus *appsv1.DeploymentStatus) bool {
	replicas := *deployment.Spec.Replicas
	return newStatus.UpdatedReplicas == replicas &&
		newStatus.Replicas == replicas &&
		newStatus.AvailableReplicas == replicas &&
		newStatus.ObservedGeneration >= deployment.Generation
}

// DeploymentProgressing reports whether newStatus shows progress compared
// with deployment.Status: more updated, ready or available pods, or fewer old
// pods (upstream DeploymentProgressing).
func DeploymentProgressing(deployment *appsv1.Deployment, newStatus *appsv1.DeploymentStatus) bool {
	old := deployment.Status
	oldPodsBefore := old.Replicas - old.UpdatedReplicas
	oldPodsNow := newStatus.Replicas - newStatus.UpdatedReplicas
	return newStatus.UpdatedReplicas > old.UpdatedReplicas ||
		oldPodsNow < oldPodsBefore ||
		newStatus.ReadyReplicas > old.ReadyReplicas ||
		newStatus.AvailableReplicas > old.AvailableReplicas
}

// DeploymentTimedOut reports whether the Progressing condition in newStatus
// is older than progressDeadlineSeconds at now, or already says
// ProgressDeadlineExceeded. A completed rollout (NewReplicaSetAvailable) never
// times out (upstream DeploymentTimedOut; now replaces its nowFn).
func DeploymentTimedOut(deployment *appsv1.Deployment, newStatus *appsv1.DeploymentStatus, now time.Time) bool {
	if !HasProgressDeadline(deployment) {
		return false
	}
	cond := GetDeploymentCondition(*newStatus, appsv1.DeploymentProgressing)
	if cond == nil {
		return false // no baseline to measure progress from
	}
	switch cond.Reason {
	case NewRSAvailableReason:
		return false
	case TimedOutReason:
		return true
	}
	deadline := cond.LastUpdateTime.Add(time.Duration(*deployment.Spec.ProgressDeadlineSeconds) * time.Second)
	return deadline.Before(now)
}

// SyncRolloutStatus returns the status upstream syncRolloutStatus would write
// after a rollout step: CalculateStatus plus the Progressing condition
// (NewReplicaSetAvailable, ReplicaSetUpdated or ProgressDeadlineExceeded) and
// the ReplicaFailure condition copied from the ReplicaSets. d.Status must be
// the Deployment's current status (the previous result); now stamps new
// conditions and decides timeouts. Nothing passed in is modified.
func SyncRolloutStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment, now time.Time) appsv1.DeploymentStatus {
	newStatus := CalculateStatus(allRSs, newRS, d, now)

	if !HasProgressDeadline(d) {
		RemoveDeploymentCondition(&newStatus, appsv1.DeploymentProgressing)
	}

	// A finished rollout that is merely being resynced needs no estimate.
	currentCond := GetDeploymentCondition(d.Status, appsv1.DeploymentProgressing)
	alreadyComplete := newStatus.Replicas == newStatus.UpdatedReplicas &&
		currentCond != nil && currentCond.Reason == NewRSAvailableReason

	if HasProgressDeadline(d) && !alreadyComplete {
		subject := fmt.Sprintf("Deployment %q", d.Name)
		if newRS != nil {
			subject = fmt.Sprintf("ReplicaSet %q", newRS.Name)
		}
		switch {
		case DeploymentComplete(d, &newStatus):
			cond := NewDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewRSAvailableReason,
				subject+" has successfully progressed.", now)
			SetDeploymentCondition(&newStatus, *cond)

		case DeploymentProgressing(d, &newStatus):
			// Unlike SetDeploymentCondition, refresh lastUpdateTime even when
			// the reason stays ReplicaSetUpdated: that time is the baseline
			// for the deadline. Keep lastTransitionTime if it was already True.
			cond := NewDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason,
				subject+" is progressing.", now)
			if currentCond != nil {
				if currentCond.Status == corev1.ConditionTrue {
					cond.LastTransitionTime = currentCond.LastTransitionTime
				}
				RemoveDeploymentCondition(&newStatus, appsv1.DeploymentProgressing)
			}
			SetDeploymentCondition(&newStatus, *cond)

		case DeploymentTimedOut(d, &newStatus, now):
			cond := NewDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, TimedOutReason,
				subject+" has timed out progressing.", now)
			SetDeploymentCondition(&newStatus, *cond)
		}
	}

	if failures := getReplicaFailures(allRSs, newRS); len(failures) > 0 {
		SetDeploymentCondition(&newStatus, failures[0])
	} else {
		RemoveDeploymentCondition(&newStatus, appsv1.DeploymentReplicaFailure)
	}
	return newStatus
}

// getReplicaFailures converts ReplicaFailure conditions of the ReplicaSets
// into Deployment conditions; the new ReplicaSet's take precedence.
func getReplicaFailures(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []appsv1.DeploymentCondition {
	collect := func(rss []*appsv1.ReplicaSet) []appsv1.DeploymentCondition {
		var out []appsv1.DeploymentCondition
		for _, rs := range rss {
			if rs == nil {
				continue
			}
			for _, c := range rs.Status.Conditions {
				if c.Type == appsv1.ReplicaSetReplicaFailure {
					out = append(out, ReplicaSetToDeploymentCondition(c))
				}
			}
		}
		return out
	}
	if failures := collect([]*appsv1.ReplicaSet{newRS}); len(failures) > 0 {
		return failures
	}
	return collect(allRSs)
}

// RequeueStuckDeployment returns when the Deployment should be looked at
// again to check its progress deadline if nothing else happens: -1 when no
// check is needed (no deadline, no Progressing condition, complete, or
// already timed out), 0 when the deadline is less than a second away, or the
// time left until the deadline (upstream requeueStuckDeployment, which then
// requeues after that duration plus one second).
func RequeueStuckDeployment(d *appsv1.Deployment, newStatus appsv1.DeploymentStatus, now time.Time) time.Duration {
	currentCond := GetDeploymentCondition(d.Status, appsv1.DeploymentProgressing)
	if !HasProgressDeadline(d) || currentCond == nil {
		return -1
	}
	if DeploymentComplete(d, &newStatus) || currentCond.Reason == TimedOutReason {
		return -1
	}
	deadline := currentCond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	after := deadline.Sub(now)
	if after < time.Second {
		return 0
	}
	return after
}

// statusEqual compares statuses like upstream's reflect.DeepEqual but treats
// equal instants in different locations as equal (statuses round-tripped
// through JSON lose their location).
func statusEqual(a, b appsv1.DeploymentStatus) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}
