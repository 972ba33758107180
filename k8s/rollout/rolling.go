package rollout

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
)

// RolloutRolling decides one step of a RollingUpdate (upstream
// rolloutRolling, minus the status update; see SyncRolloutStatus).
// oldRSs are all ReplicaSets other than the new one (FindOldReplicaSets'
// second result). If newRS is nil it is planned with NewReplicaSetFor and
// returned in Plan.Create (or StepHashCollision if its name is taken).
//
// Per sync it does one thing: grow the new ReplicaSet as far as maxSurge
// allows (StepScaleUpNew, or StepScaleDownNew if it is too big); otherwise
// shrink old ReplicaSets within maxUnavailable, unavailable pods first
// (StepCleanupUnhealthy / StepScaleDownOld); otherwise, if d.Status says the
// rollout is complete, delete history beyond revisionHistoryLimit. Creating
// the new ReplicaSet does not count as growing it, so old ReplicaSets may
// shrink in the same sync.
func RolloutRolling(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) (Plan, error) {
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
	allRSs := append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)

	// Scale up, if we can.
	op, err := reconcileNewReplicaSet(allRSs, newRS, d)
	if err != nil {
		return Plan{}, err
	}
	if op != nil {
		plan.Scales = []ScaleOp{*op}
		plan.Step = StepScaleUpNew
		if op.To < op.From {
			plan.Step = StepScaleDownNew
		}
		return plan, nil
	}

	// Scale down, if we can.
	ops, cleanedUp, scaledDown := reconcileOldReplicaSets(allRSs, FilterActiveReplicaSets(oldRSs), newRS, d)
	plan.Scales = ops
	if cleanedUp+scaledDown > 0 {
		plan.Step = StepScaleDownOld
		if scaledDown == 0 {
			plan.Step = StepCleanupUnhealthy
		}
		return plan, nil
	}

	if DeploymentComplete(d, &d.Status) {
		plan.Deletes = CleanupDeployment(oldRSs, d).Deletes
	}
	plan.Step = idleStep(d, plan)
	return plan, nil
}

// idleStep names a sync that grew or shrank nothing.
func idleStep(d *appsv1.Deployment, plan Plan) Step {
	switch {
	case len(plan.Scales) > 0:
		// Only reachable when upstream's unhealthy cleanup stopped half way.
		return StepCleanupUnhealthy
	case plan.Create != nil:
		return StepCreateNew
	case len(plan.Deletes) > 0:
		return StepCleanupHistory
	case DeploymentComplete(d, &d.Status):
		return StepComplete
	default:
		return StepWait
	}
}

// reconcileNewReplicaSet grows the new ReplicaSet up to what
// NewRSNewReplicas allows, or shrinks it to spec.replicas if it is larger
// (upstream reconcileNewReplicaSet). nil means no change.
func reconcileNewReplicaSet(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, deployment *appsv1.Deployment) (*ScaleOp, error) {
	replicas := *deployment.Spec.Replicas
	switch current := *newRS.Spec.Replicas; {
	case current == replicas:
		return nil, nil
	case current > replicas:
		op, _ := scaleReplicaSet(newRS, replicas, deployment, false)
		return op, nil
	}
	target, err := NewRSNewReplicas(deployment, allRSs, newRS)
	if err != nil {
		return nil, err
	}
	op, _ := scaleReplicaSet(newRS, target, deployment, false)
	return op, nil
}

// reconcileOldReplicaSets shrinks the active old ReplicaSets as far as
// availability allows (upstream reconcileOldReplicaSets). The budget is
//
//	all pods - (spec.replicas - maxUnavailable) - unavailable pods of newRS
//
// so that new pods that are not (yet) available never let old, available
// pods go. Unavailable old pods are removed first (cleanupUnhealthyReplicas);
// then, on the resulting sizes, old pods are removed while more than
// minAvailable pods are available (scaleDownOldReplicaSetsForRollingUpdate).
// It returns the operations in order and how many pods each part removed.
func reconcileOldReplicaSets(allRSs, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, deployment *appsv1.Deployment) (ops []ScaleOp, cleanedUp, scaledDown int32) {
	if GetReplicaCountForReplicaSets(oldRSs) == 0 {
		return nil, 0, 0 // nothing left to scale down
	}
	minAvailable := *deployment.Spec.Replicas - MaxUnavailable(*deployment)
	newRSUnavailable := *newRS.Spec.Replicas - newRS.Status.AvailableReplicas
	maxScaledDown := GetReplicaCountForReplicaSets(allRSs) - minAvailable - newRSUnavailable
	if maxScaledDown <= 0 {
		return nil, 0, 0
	}

	oldRSs, ops, cleanedUp, err := cleanupUnhealthyReplicas(oldRSs, deployment, maxScaledDown)
	if err != nil {
		// Upstream gives up on this sync but the updates already sent stand;
		// it reports "not scaled" so the rollout carries on to the status.
		return ops, 0, 0
	}

	allRSs = append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	more, scaledDown := scaleDownOldReplicaSetsForRollingUpdate(allRSs, oldRSs, deployment)
	return append(ops, more...), cleanedUp, scaledDown
}

// cleanupUnhealthyReplicas removes up to maxCleanupCount unavailable pods
// from the old ReplicaSets, oldest first (upstream cleanupUnhealthyReplicas).
// It returns the old ReplicaSets (oldest first) with the operations applied,
// the operations, and the number of pods removed. An old ReplicaSet reporting
// more available pods than its size is an error, as upstream; operations
// decided before it are still returned.
func cleanupUnhealthyReplicas(oldRSs []*appsv1.ReplicaSet, deployment *appsv1.Deployment, maxCleanupCount int32) ([]*appsv1.ReplicaSet, []ScaleOp, int32, error) {
	rss := sortedByCreationTimestamp(oldRSs)
	var ops []ScaleOp
	var total int32
	for i, rs := range rss {
		if total >= maxCleanupCount {
			break
		}
		size := *rs.Spec.Replicas
		if size == 0 || size == rs.Status.AvailableReplicas {
			continue // nothing unhealthy here
		}
		count := min(maxCleanupCount-total, size-rs.Status.AvailableReplicas)
		newSize := size - count
		if newSize > size {
			return nil, ops, 0, fmt.Errorf("when cleaning up unhealthy replicas, got invalid request to scale down %s/%s %d -> %d", rs.Namespace, rs.Name, size, newSize)
		}
		if op, _ := scaleReplicaSet(rs, newSize, deployment, false); op != nil {
			ops = append(ops, *op)
			rss[i] = op.ApplyTo(rs)
		}
		total += count
	}
	return rss, ops, total, nil
}

// scaleDownOldReplicaSetsForRollingUpdate removes old pods, oldest
// ReplicaSet first, while more than spec.replicas - maxUnavailable pods are
// available across allRSs (upstream scaleDownOldReplicaSetsForRollingUpdate).
func scaleDownOldReplicaSetsForRollingUpdate(allRSs, oldRSs []*appsv1.ReplicaSet, deployment *appsv1.Deployment) ([]ScaleOp, int32) {
	minAvailable := *deployment.Spec.Replicas - MaxUnavailable(*deployment)
	available := GetAvailableReplicaCountForReplicaSets(allRSs)
	if available <= minAvailable {
		return nil, 0
	}
	budget := available - minAvailable

	var ops []ScaleOp
	var total int32
	for _, rs := range sortedByCreationTimestamp(oldRSs) {
		if total >= budget {
			break
		}
		size := *rs.Spec.Replicas
		if size == 0 {
			continue
		}
		count := min(size, budget-total)
		if op, _ := scaleReplicaSet(rs, size-count, deployment, false); op != nil {
			ops = append(ops, *op)
		}
		total += count
	}
	return ops, total
}

// collisionPlan is the plan for a new ReplicaSet whose name is taken.
func collisionPlan(wanted *appsv1.ReplicaSet) Plan {
	return Plan{
		Step:    StepHashCollision,
		Message: fmt.Sprintf("Found a hash collision for replica set %q; bumping status.collisionCount", wanted.Name),
	}
}
