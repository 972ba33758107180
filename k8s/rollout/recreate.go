package rollout

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// RolloutRecreate decides one step of a Recreate rollout (upstream
// rolloutRecreate, minus the status update; see SyncRolloutStatus). oldRSs
// are all ReplicaSets other than the new one; newRS may be nil.
//
// First every active old ReplicaSet is scaled to 0
// (StepRecreateScaleDownOld). Then, while old pods still run, nothing happens
// (StepRecreateWaitOldPodsGone): oldPodsRunning is the caller's knowledge of
// pods (see OldPodsRunning) and is combined with the old ReplicaSets'
// status.replicas. Then the new ReplicaSet is created if missing (at full
// size) and scaled to spec.replicas (StepRecreateScaleUpNew). Once d.Status
// says the rollout is complete, history beyond revisionHistoryLimit is
// deleted.
func RolloutRecreate(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, oldPodsRunning bool) (Plan, error) {
	if ops := scaleDownOldReplicaSetsForRecreate(FilterActiveReplicaSets(oldRSs), d); len(ops) > 0 {
		return Plan{Step: StepRecreateScaleDownOld, Scales: ops}, nil
	}

	// Never run old and new pods side by side.
	if oldPodsRunning || GetActualReplicaCountForReplicaSets(oldRSs) > 0 {
		return Plan{Step: StepRecreateWaitOldPodsGone}, nil
	}

	var plan Plan
	if newRS == nil {
		created, collision, err := planNewReplicaSet(d, oldRSs)
		if err != nil {
			return Plan{}, err
		}
		if collision {
			return collisionPlan(created), nil
		}
		newRS, plan.Create = created, created
	}

	if op := scaleUpNewReplicaSetForRecreate(newRS, d); op != nil {
		plan.Scales = []ScaleOp{*op}
	}
	if DeploymentComplete(d, &d.Status) {
		plan.Deletes = CleanupDeployment(oldRSs, d).Deletes
	}

	if plan.Create != nil || len(plan.Scales) > 0 {
		plan.Step = StepRecreateScaleUpNew
	} else {
		plan.Step = idleStep(d, plan)
	}
	return plan, nil
}

// scaleDownOldReplicaSetsForRecreate scales every given old ReplicaSet with
// replicas to 0 (upstream scaleDownOldReplicaSetsForRecreate).
func scaleDownOldReplicaSetsForRecreate(oldRSs []*appsv1.ReplicaSet, deployment *appsv1.Deployment) []ScaleOp {
	var ops []ScaleOp
	for _, rs := range oldRSs {
		if *rs.Spec.Replicas == 0 {
			continue
		}
		if op, _ := scaleReplicaSet(rs, 0, deployment, false); op != nil {
			ops = append(ops, *op)
		}
	}
	return ops
}

// scaleUpNewReplicaSetForRecreate scales the new ReplicaSet to spec.replicas
// (upstream scaleUpNewReplicaSetForRecreate). nil means no change.
func scaleUpNewReplicaSetForRecreate(newRS *appsv1.ReplicaSet, deployment *appsv1.Deployment) *ScaleOp {
	op, _ := scaleReplicaSet(newRS, *deployment.Spec.Replicas, deployment, false)
	return op
}

// OldPodsRunning reports whether any old ReplicaSet still reports pods, or
// any pod not owned by the new ReplicaSet is not yet Succeeded or Failed
// (Unknown counts as running). podMap groups the Deployment's pods by the UID
// of their owning ReplicaSet (upstream oldPodsRunning). Sync takes the
// result as its oldPodsRunning argument.
func OldPodsRunning(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) bool {
	if GetActualReplicaCountForReplicaSets(oldRSs) > 0 {
		return true
	}
	for owner, pods := range podMap {
		if newRS != nil && newRS.UID == owner {
			continue
		}
		for _, pod := range pods {
			switch pod.Status.Phase {
			case corev1.PodFailed, corev1.PodSucceeded:
				// Terminal pods do not count.
			default:
				return true
			}
		}
	}
	return false
}
