package rollout

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Sync decides what ONE run of upstream's syncDeployment would do and
// returns it as a Plan, together with the Deployment status upstream would
// have written by the end of that run.
//
// Inputs:
//   - d is the desired Deployment. d.Status must be the status returned by
//     the previous Sync (zero value the first time): conditions, collision
//     count and the counts used to detect progress live there. Defaults are
//     not applied (see SetDeploymentDefaults); spec.replicas and
//     spec.selector must be set.
//   - rsList are all live ReplicaSets of the Deployment (new and old).
//   - oldPodsRunning tells whether any pod of an old ReplicaSet is still
//     running (see OldPodsRunning); only Recreate uses it.
//   - now is the current time, used for condition timestamps and the
//     progress deadline.
//
// Order of decisions, as upstream: empty selector → StepSelectingAll; being
// deleted → StepStatusOnly; paused → StepPaused (proportional scaling and
// history cleanup only); deprecated rollbackTo annotation → StepRollback;
// spec.replicas changed → StepProportional; otherwise the strategy
// (RolloutRolling or RolloutRecreate). Unless the selector is empty, an
// existing new ReplicaSet whose revision, annotations or minReadySeconds are
// stale is first updated on its own (StepSyncRevision).
//
// Nothing passed in is modified.
func Sync(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, oldPodsRunning bool, now time.Time) (Plan, appsv1.DeploymentStatus, error) {
	if err := validate(d); err != nil {
		return Plan{}, appsv1.DeploymentStatus{}, err
	}
	s := &syncer{d: d.DeepCopy(), before: *d.Status.DeepCopy(), rsList: rsList, now: now}
	plan, err := s.sync(oldPodsRunning)
	if err != nil {
		return Plan{}, appsv1.DeploymentStatus{}, err
	}
	plan.StatusChanged = !statusEqual(s.d.Status, s.before)
	return plan, s.d.Status, nil
}

func validate(d *appsv1.Deployment) error {
	switch {
	case d == nil:
		return errors.New("deployment is nil")
	case d.Spec.Replicas == nil:
		return fmt.Errorf("deployment %q: spec.replicas is not set (see SetDeploymentDefaults)", d.Name)
	case d.Spec.Selector == nil:
		return fmt.Errorf("deployment %q: spec.selector is not set", d.Name)
	case IsRollingUpdate(d) && d.Spec.Strategy.RollingUpdate == nil:
		return fmt.Errorf("deployment %q: spec.strategy.rollingUpdate is not set (see SetDeploymentDefaults)", d.Name)
	}
	return nil
}

// syncer carries one sync. d is a private copy that is changed the way
// upstream changes its copy of the Deployment (conditions, revision,
// collision count); its final status is the status to write.
type syncer struct {
	d      *appsv1.Deployment
	before appsv1.DeploymentStatus
	rsList []*appsv1.ReplicaSet
	now    time.Time
}

// sync follows upstream syncDeployment.
func (s *syncer) sync(oldPodsRunning bool) (Plan, error) {
	d := s.d
	// reflect (not semantic) equality, as upstream: an empty but non-nil
	// matchLabels is not caught here.
	if reflect.DeepEqual(d.Spec.Selector, &metav1.LabelSelector{}) {
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
		}
		return Plan{Step: StepSelectingAll, Message: "This deployment is selecting all pods. A non-empty selector is required."}, nil
	}

	if d.DeletionTimestamp != nil {
		newRS, oldRSs, update := s.getAllReplicaSetsAndSyncRevision()
		if update != nil {
			return Plan{Step: StepSyncRevision, Update: update}, nil
		}
		d.Status = CalculateStatus(append(oldRSs, newRS), newRS, d, s.now)
		return Plan{Step: StepStatusOnly}, nil
	}

	s.checkPausedConditions()

	newRS, oldRSs, update := s.getAllReplicaSetsAndSyncRevision()
	if update != nil {
		return Plan{Step: StepSyncRevision, Update: update}, nil
	}

	if d.Spec.Paused {
		return s.scale(StepPaused, newRS, oldRSs), nil
	}
	if revision, ok := getRollbackTo(d); ok {
		return s.rollback(newRS, oldRSs, revision)
	}
	if IsScalingEvent(d, s.rsList) {
		return s.scale(StepProportional, newRS, oldRSs), nil
	}

	var plan Plan
	var err error
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		plan, err = RolloutRecreate(d, newRS, oldRSs, oldPodsRunning)
	case appsv1.RollingUpdateDeploymentStrategyType:
		plan, err = RolloutRolling(d, newRS, oldRSs)
	default:
		return Plan{}, fmt.Errorf("unexpected deployment strategy type: %s", d.Spec.Strategy.Type)
	}
	if err != nil {
		return Plan{}, err
	}
	if plan.Step == StepHashCollision {
		s.bumpCollisionCount()
		return plan, nil
	}
	if plan.Create != nil {
		newRS = plan.Create
		s.recordCreated(newRS)
	}
	s.syncRolloutStatus(&plan, append(oldRSs, newRS), newRS)
	return plan, nil
}

// getAllReplicaSetsAndSyncRevision splits the ReplicaSets into the new one
// (nil if none) and all old ones, and brings the new one's revision up to
// date (upstream getAllReplicaSetsAndSyncRevision with createIfNotExisted
// false). If the new ReplicaSet itself must be updated, that update is
// returned; upstream sends it and (through a conflict on its second call in
// the same sync) effectively ends the sync, so the Deployment is only
// touched on the next one. Otherwise the Deployment gets the new
// ReplicaSet's revision and, if it has no Progressing condition yet, a
// FoundNewReplicaSet one.
func (s *syncer) getAllReplicaSetsAndSyncRevision() (newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, update *appsv1.ReplicaSet) {
	d := s.d
	_, oldRSs = FindOldReplicaSets(d, s.rsList)
	existing := FindNewReplicaSet(d, s.rsList)
	if existing == nil {
		return nil, oldRSs, nil
	}
	synced, needsUpdate := SyncExistingNewReplicaSet(d, existing, oldRSs)
	if needsUpdate {
		return existing, oldRSs, synced
	}
	SetDeploymentRevision(d, synced.Annotations[RevisionAnnotation])
	if HasProgressDeadline(d) && GetDeploymentCondition(d.Status, appsv1.DeploymentProgressing) == nil {
		msg := fmt.Sprintf("Found new replica set %q", existing.Name)
		SetDeploymentCondition(&d.Status, *NewDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, FoundNewRSReason, msg, s.now))
	}
	return existing, oldRSs, nil
}

// recordCreated updates the Deployment after the new ReplicaSet is created
// (end of upstream getNewReplicaSet): revision, and a NewReplicaSetCreated
// Progressing condition when a deadline is set.
func (s *syncer) recordCreated(created *appsv1.ReplicaSet) {
	SetDeploymentRevision(s.d, created.Annotations[RevisionAnnotation])
	if HasProgressDeadline(s.d) {
		msg := fmt.Sprintf("Created new replica set %q", created.Name)
		SetDeploymentCondition(&s.d.Status, *NewDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewReplicaSetReason, msg, s.now))
	}
}

// bumpCollisionCount is upstream's reaction to a name taken by a ReplicaSet
// with another template.
func (s *syncer) bumpCollisionCount() {
	var next int32
	if cc := s.d.Status.CollisionCount; cc != nil {
		next = *cc + 1
	} else {
		next = 1
	}
	s.d.Status.CollisionCount = &next
}

// checkPausedConditions records pausing and resuming in the Progressing
// condition so a resumed Deployment does not time out right away (upstream
// checkPausedConditions). A timed out Deployment keeps its condition.
func (s *syncer) checkPausedConditions() {
	d := s.d
	if !HasProgressDeadline(d) {
		return
	}
	cond := GetDeploymentCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == TimedOutReason {
		return
	}
	pausedCondExists := cond != nil && cond.Reason == PausedDeployReason
	switch {
	case d.Spec.Paused && !pausedCondExists:
		SetDeploymentCondition(&d.Status, *NewDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, PausedDeployReason, "Deployment is paused", s.now))
	case !d.Spec.Paused && pausedCondExists:
		SetDeploymentCondition(&d.Status, *NewDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ResumedDeployReason, "Deployment is resumed", s.now))
	}
}

// scale is upstream sync(): proportional scaling, history cleanup when
// paused (and no rollback is pending), then a plain status update.
func (s *syncer) scale(step Step, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) Plan {
	d := s.d
	plan := Scale(d, newRS, oldRSs)
	plan.Step = step
	if _, rollbackPending := getRollbackTo(d); d.Spec.Paused && !rollbackPending {
		// Upstream's scale leaves oldRSs sorted newest first (in place, in
		// FindActiveOrLatest) and cleanup sorts by revision from there. The
		// starting order only matters when a revision is unparsable, as that
		// ordering is then not transitive; keep it identical.
		plan.Deletes = CleanupDeployment(reversed(oldRSs), d).Deletes
	}
	s.d.Status = CalculateStatus(append(oldRSs, newRS), newRS, d, s.now)
	return plan
}

// rollback is upstream rollback(): create the new ReplicaSet if needed, then
// roll the template back. The status is not recalculated on this path.
func (s *syncer) rollback(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, revision int64) (Plan, error) {
	var plan Plan
	if newRS == nil {
		created, collision, err := planNewReplicaSet(s.d, oldRSs)
		if err != nil {
			return Plan{}, err
		}
		if collision {
			s.bumpCollisionCount()
			return collisionPlan(created), nil
		}
		newRS, plan.Create = created, created
		s.recordCreated(created)
	}
	res := rollback(s.d, append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS), revision)
	plan.Step = StepRollback
	plan.Deployment = res.Deployment
	plan.Message = res.Reason + ": " + res.Message
	return plan, nil
}

// syncRolloutStatus computes the final status and, like upstream's
// requeueStuckDeployment, when the status is unchanged, how long until the
// progress deadline must be checked.
func (s *syncer) syncRolloutStatus(plan *Plan, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) {
	newStatus := SyncRolloutStatus(allRSs, newRS, s.d, s.now)
	if statusEqual(s.d.Status, newStatus) {
		switch after := RequeueStuckDeployment(s.d, newStatus, s.now); {
		case after == 0:
			plan.RequeueAfter = time.Second
		case after > 0:
			plan.RequeueAfter = after + time.Second
		}
	}
	s.d.Status = newStatus
}

// reversed returns a reversed copy.
func reversed(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	out := make([]*appsv1.ReplicaSet, len(rss))
	for i, rs := range rss {
		out[len(rss)-1-i] = rs
	}
	return out
}
