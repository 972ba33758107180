package rollout

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Step names the decision one sync took. Upstream's syncDeployment takes
// exactly one of these paths per call.
type Step string

const (
	// StepSelectingAll: the selector is empty; upstream refuses to act and
	// only records observedGeneration.
	StepSelectingAll Step = "SelectingAll"
	// StepStatusOnly: the Deployment is being deleted; only status is synced.
	StepStatusOnly Step = "StatusOnly"
	// StepSyncRevision: the existing new ReplicaSet needs its annotations
	// (revision, revision history, copied Deployment annotations) or
	// minReadySeconds updated; Plan.Update holds it. Nothing else happens in
	// this sync.
	StepSyncRevision Step = "SyncRevision"
	// StepHashCollision: the name of the ReplicaSet to create is taken by a
	// ReplicaSet with another template; status.collisionCount is bumped and
	// the next sync computes a new name.
	StepHashCollision Step = "HashCollision"
	// StepPaused: the Deployment is paused; only proportional scaling and
	// history cleanup happen, no rollout.
	StepPaused Step = "Paused"
	// StepRollback: the deprecated rollbackTo annotation is set; Plan.Deployment
	// holds the rolled back Deployment.
	StepRollback Step = "Rollback"
	// StepProportional: spec.replicas changed mid-rollout; all active
	// ReplicaSets are resized proportionally.
	StepProportional Step = "Proportional"

	// StepCreateNew: the new ReplicaSet is created (Plan.Create) and nothing
	// else needs scaling in this sync (rolling update).
	StepCreateNew Step = "CreateNew"
	// StepScaleUpNew: the new ReplicaSet grows (rolling update). Old ones are
	// not touched in the same sync.
	StepScaleUpNew Step = "ScaleUpNew"
	// StepScaleDownNew: the new ReplicaSet is larger than spec.replicas and
	// shrinks (rolling update).
	StepScaleDownNew Step = "ScaleDownNew"
	// StepCleanupUnhealthy: only unavailable pods of old ReplicaSets are
	// removed (rolling update).
	StepCleanupUnhealthy Step = "CleanupUnhealthy"
	// StepScaleDownOld: old ReplicaSets shrink within maxUnavailable (rolling
	// update), possibly after an unhealthy-pod cleanup in the same sync.
	StepScaleDownOld Step = "ScaleDownOld"

	// StepRecreateScaleDownOld: Recreate scales every old ReplicaSet to 0.
	StepRecreateScaleDownOld Step = "Recreate/ScaleDownOld"
	// StepRecreateWaitOldPodsGone: Recreate waits until no old pod runs.
	StepRecreateWaitOldPodsGone Step = "Recreate/WaitOldPodsGone"
	// StepRecreateScaleUpNew: Recreate creates and/or scales up the new
	// ReplicaSet to spec.replicas.
	StepRecreateScaleUpNew Step = "Recreate/ScaleUpNew"

	// StepCleanupHistory: nothing to scale; old ReplicaSets beyond
	// revisionHistoryLimit are deleted (Plan.Deletes).
	StepCleanupHistory Step = "CleanupHistory"
	// StepComplete: nothing to do and the status passed in was already
	// complete. A caller's loop is done when it gets this step.
	StepComplete Step = "Complete"
	// StepWait: nothing to do until pods change (become available, terminate).
	StepWait Step = "Wait"
)

// ScaleOp sets one ReplicaSet's spec.replicas to To and its desired-replicas
// and max-replicas annotations to DesiredReplicas and MaxReplicas (upstream
// scaleReplicaSet). From == To means only the annotations change.
type ScaleOp struct {
	ReplicaSet      string // name, in the Deployment's namespace
	From, To        int32  // spec.replicas before and after
	DesiredReplicas int32  // DesiredReplicasAnnotation value to write
	MaxReplicas     int32  // MaxReplicasAnnotation value to write
	// Reason is the message of upstream's ScalingReplicaSet event, e.g.
	// "Scaled up replica set web-5d8f9 from 0 to 3". Upstream emits no event
	// for annotation-only updates; Reason then says what is updated.
	Reason string
}

// ApplyTo returns a copy of rs with the operation applied; rs is untouched.
func (op ScaleOp) ApplyTo(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	out := rs.DeepCopy()
	out.Spec.Replicas = int32Ptr(op.To)
	SetReplicasAnnotations(out, op.DesiredReplicas, op.MaxReplicas)
	return out
}

// Plan is what one sync decided. Apply it in field order: Update or Create,
// then Scales in order (a ReplicaSet may appear twice; later ops win), then
// Deletes, then replace the desired Deployment with Deployment if set.
type Plan struct {
	Step Step
	// Create is the new ReplicaSet to create (upstream getNewReplicaSet).
	Create *appsv1.ReplicaSet
	// Update is the existing new ReplicaSet with synced annotations and
	// minReadySeconds, to write with an Update (resourceVersion kept).
	Update *appsv1.ReplicaSet
	// Scales are ReplicaSet resizes, in upstream order.
	Scales []ScaleOp
	// Deletes are names of old ReplicaSets removed by history cleanup.
	Deletes []string
	// Deployment is set by StepRollback: the new desired Deployment (template
	// rolled back, rollbackTo annotation cleared).
	Deployment *appsv1.Deployment
	// Message explains steps without operations (rollback outcome, hash
	// collision, empty selector), like upstream's events.
	Message string
	// StatusChanged reports whether the returned status differs from the
	// status passed in. Upstream re-syncs after its own status writes, so a
	// caller should persist the status and Sync again right away.
	StatusChanged bool
	// RequeueAfter, when > 0, is how long to wait before syncing again if
	// nothing else changes, so the progress deadline gets evaluated
	// (upstream requeueStuckDeployment: time left + 1s; 1s when less than a
	// second is left). 0 means no timed re-sync is needed.
	RequeueAfter time.Duration
}

// Empty reports whether the plan has no operation to apply.
func (p Plan) Empty() bool {
	return p.Create == nil && p.Update == nil && len(p.Scales) == 0 && len(p.Deletes) == 0 && p.Deployment == nil
}

// scaleReplicaSet returns the operation upstream's scaleReplicaSet would send
// to resize rs to newScale, and whether that operation changes its size.
// Without forceUpdate nothing happens unless the size differs; with it the
// replicas annotations alone can also trigger an update.
func scaleReplicaSet(rs *appsv1.ReplicaSet, newScale int32, deployment *appsv1.Deployment, forceUpdate bool) (*ScaleOp, bool) {
	from := *rs.Spec.Replicas
	if !forceUpdate && from == newScale {
		return nil, false
	}
	desired := *deployment.Spec.Replicas
	maxReplicas := desired + MaxSurge(*deployment)
	resize := from != newScale
	if !resize && !ReplicasAnnotationsNeedUpdate(rs, desired, maxReplicas) {
		return nil, false
	}
	op := &ScaleOp{ReplicaSet: rs.Name, From: from, To: newScale, DesiredReplicas: desired, MaxReplicas: maxReplicas}
	switch {
	case from < newScale:
		op.Reason = fmt.Sprintf("Scaled up replica set %s from %d to %d", rs.Name, from, newScale)
	case from > newScale:
		op.Reason = fmt.Sprintf("Scaled down replica set %s from %d to %d", rs.Name, from, newScale)
	default:
		op.Reason = fmt.Sprintf("Updated replica set %s annotations to desired-replicas=%d max-replicas=%d", rs.Name, desired, maxReplicas)
	}
	return op, resize
}

// Scale resizes the ReplicaSets when spec.replicas changed during a rollout
// or while paused (upstream scale). A single active (or, if none is active,
// the newest) ReplicaSet takes the whole count; a saturated new ReplicaSet
// makes the old ones go to 0; otherwise, for RollingUpdate, the difference
// to spec.replicas+maxSurge is spread over the active ReplicaSets in
// proportion to their size against their max-replicas annotation, with the
// rounding leftover going to the largest (largest-newest first when growing,
// largest-oldest first when shrinking). Every active ReplicaSet also gets its
// replicas annotations refreshed.
func Scale(deployment *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) Plan {
	plan := Plan{Step: StepProportional}
	add := func(op *ScaleOp, _ bool) {
		if op != nil {
			plan.Scales = append(plan.Scales, *op)
		}
	}
	replicas := *deployment.Spec.Replicas

	if target := FindActiveOrLatest(newRS, oldRSs); target != nil {
		if *target.Spec.Replicas != replicas {
			add(scaleReplicaSet(target, replicas, deployment, false))
		}
		return plan
	}

	// The new ReplicaSet holds everything (e.g. after adopting ReplicaSets):
	// the old ones must go.
	if IsSaturated(deployment, newRS) {
		for _, old := range FilterActiveReplicaSets(oldRSs) {
			add(scaleReplicaSet(old, 0, deployment, false))
		}
		return plan
	}

	if !IsRollingUpdate(deployment) {
		return plan
	}

	active := FilterActiveReplicaSets(append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS))
	var allowed int32
	if replicas > 0 {
		allowed = replicas + MaxSurge(*deployment)
	}
	toAdd := allowed - GetReplicaCountForReplicaSets(active)
	switch {
	case toAdd > 0:
		sort.Sort(ReplicaSetsBySizeNewer(active))
	case toAdd < 0:
		sort.Sort(ReplicaSetsBySizeOlder(active))
	}

	sizes := make([]int32, len(active))
	var added int32
	for i, rs := range active {
		sizes[i] = *rs.Spec.Replicas
		if toAdd != 0 {
			share := GetReplicaSetProportion(rs, *deployment, toAdd, added)
			sizes[i] += share
			added += share
		}
	}
	if toAdd != 0 && len(active) > 0 {
		sizes[0] = max(sizes[0]+toAdd-added, 0)
	}
	for i, rs := range active {
		add(scaleReplicaSet(rs, sizes[i], deployment, true))
	}
	return plan
}

// IsScalingEvent reports whether spec.replicas differs from the
// desired-replicas annotation of any active ReplicaSet, i.e. the Deployment
// was resized rather than changed (upstream isScalingEvent).
func IsScalingEvent(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) bool {
	_, oldRSs := FindOldReplicaSets(d, rsList)
	allRSs := append(oldRSs, FindNewReplicaSet(d, rsList))
	for _, rs := range FilterActiveReplicaSets(allRSs) {
		if desired, ok := GetDesiredReplicasAnnotation(rs); ok && desired != *d.Spec.Replicas {
			return true
		}
	}
	return false
}

// CleanupDeployment deletes old ReplicaSets beyond revisionHistoryLimit
// (upstream cleanupDeployment). Only the lowest-revision len-limit
// ReplicaSets that are not already being deleted are examined, and of those
// only ones with no replicas (spec and status), whose latest generation was
// observed, are deleted. Nothing happens without a finite limit.
func CleanupDeployment(oldRSs []*appsv1.ReplicaSet, deployment *appsv1.Deployment) Plan {
	if !HasRevisionHistoryLimit(deployment) {
		return Plan{}
	}
	cleanable := filterReplicaSets(oldRSs, func(rs *appsv1.ReplicaSet) bool {
		return rs != nil && rs.DeletionTimestamp == nil
	})
	excess := len(cleanable) - int(*deployment.Spec.RevisionHistoryLimit)
	if excess <= 0 {
		return Plan{}
	}
	sort.Sort(ReplicaSetsByRevision(cleanable))

	var plan Plan
	for _, rs := range cleanable[:excess] {
		if rs.Status.Replicas != 0 || *rs.Spec.Replicas != 0 || rs.Generation > rs.Status.ObservedGeneration || rs.DeletionTimestamp != nil {
			continue
		}
		plan.Deletes = append(plan.Deletes, rs.Name)
	}
	if len(plan.Deletes) > 0 {
		plan.Step = StepCleanupHistory
	}
	return plan
}

// HasRevisionHistoryLimit reports whether revisionHistoryLimit is set to a
// finite value (upstream HasRevisionHistoryLimit).
func HasRevisionHistoryLimit(d *appsv1.Deployment) bool {
	return d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit != math.MaxInt32
}

// CalculateStatus returns the Deployment status derived from its ReplicaSets:
// replica counts (including terminatingReplicas, as with the
// DeploymentReplicaSetTerminatingReplicas feature gate on, its default in
// v1.36), observedGeneration, collisionCount, the existing conditions and an
// Available condition stamped with now when it changes (upstream
// calculateStatus, which uses metav1.Now()). Nothing is modified.
func CalculateStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, deployment *appsv1.Deployment, now time.Time) appsv1.DeploymentStatus {
	available := GetAvailableReplicaCountForReplicaSets(allRSs)
	unavailable := max(GetReplicaCountForReplicaSets(allRSs)-available, 0)

	status := appsv1.DeploymentStatus{
		ObservedGeneration:  deployment.Generation,
		Replicas:            GetActualReplicaCountForReplicaSets(allRSs),
		UpdatedReplicas:     GetActualReplicaCountForReplicaSets([]*appsv1.ReplicaSet{newRS}),
		ReadyReplicas:       GetReadyReplicaCountForReplicaSets(allRSs),
		AvailableReplicas:   available,
		UnavailableReplicas: unavailable,
		TerminatingReplicas: GetTerminatingReplicaCountForReplicaSets(allRSs),
	}
	if cc := deployment.Status.CollisionCount; cc != nil {
		status.CollisionCount = int32Ptr(*cc)
	}
	status.Conditions = append(status.Conditions, deployment.Status.Conditions...)

	if available >= *deployment.Spec.Replicas-MaxUnavailable(*deployment) {
		SetDeploymentCondition(&status, *NewDeploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue,
			MinimumReplicasAvailable, "Deployment has minimum availability.", now))
	} else {
		SetDeploymentCondition(&status, *NewDeploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse,
			MinimumReplicasUnavailable, "Deployment does not have minimum availability.", now))
	}
	return status
}

// ---------------------------------------------------------------------------
// The new ReplicaSet (upstream getNewReplicaSet)

// NewReplicaSetFor returns the ReplicaSet upstream's getNewReplicaSet creates
// when the Deployment has none matching its template. oldRSs are all other
// ReplicaSets of the Deployment. The name is <deployment>-<hash> (hash of the
// template and status.collisionCount, name truncated to fit), the hash is
// added to its labels, selector and template labels, its revision is
// MaxRevision(oldRSs)+1, its size is NewRSNewReplicas, and it carries the
// Deployment's annotations plus the replicas annotations. No owner reference
// is set.
func NewReplicaSetFor(d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	template := d.Spec.Template.DeepCopy()
	hash := ComputeHash(template, d.Status.CollisionCount)
	template.Labels = cloneWithLabel(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)

	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = cloneWithLabel(selector.MatchLabels, appsv1.DefaultDeploymentUniqueLabelKey, hash)

	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:      replicaSetName(d.Name, hash),
			Namespace: d.Namespace,
			Labels:    cloneWithLabel(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash),
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        int32Ptr(0),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        *template,
		},
	}
	size, err := NewRSNewReplicas(d, append(append([]*appsv1.ReplicaSet(nil), oldRSs...), rs), rs)
	if err != nil {
		return nil, err
	}
	rs.Spec.Replicas = int32Ptr(size)
	SetNewReplicaSetAnnotations(d, rs, strconv.FormatInt(MaxRevision(oldRSs)+1, 10), false, maxRevHistoryLengthInChars)
	return rs, nil
}

// replicaSetName joins the Deployment name and the hash, truncating the
// Deployment name so the result stays a valid object name (upstream
// generateReplicaSetName).
func replicaSetName(deploymentName, hash string) string {
	room := validation.DNS1123SubdomainMaxLength - len("-") - len(hash)
	if len(deploymentName) > room && room > 0 {
		deploymentName = deploymentName[:room]
	}
	return deploymentName + "-" + hash
}

// SyncExistingNewReplicaSet returns a copy of the existing new ReplicaSet
// with what upstream's getNewReplicaSet updates on it: the Deployment's
// annotations copied, its revision raised to MaxRevision(oldRSs)+1 (keeping
// the replaced revision in RevisionHistoryAnnotation when a rollback reuses
// it) and minReadySeconds synced. The bool reports whether an Update is
// needed.
func SyncExistingNewReplicaSet(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, bool) {
	rs := newRS.DeepCopy()
	newRevision := strconv.FormatInt(MaxRevision(oldRSs)+1, 10)
	annotationsChanged := SetNewReplicaSetAnnotations(d, rs, newRevision, true, maxRevHistoryLengthInChars)
	minReadyChanged := rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds
	if !annotationsChanged && !minReadyChanged {
		return rs, false
	}
	rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
	return rs, true
}

// planNewReplicaSet computes the ReplicaSet to create and reports a hash
// collision when its name is already used by one of oldRSs (which, not
// being the new ReplicaSet, has a different template).
func planNewReplicaSet(d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, bool, error) {
	rs, err := NewReplicaSetFor(d, oldRSs)
	if err != nil {
		return nil, false, err
	}
	for _, old := range oldRSs {
		if old != nil && old.Name == rs.Name && old.Namespace == rs.Namespace {
			return rs, true, nil
		}
	}
	return rs, false, nil
}
