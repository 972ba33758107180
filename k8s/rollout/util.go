package rollout

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Annotations the Deployment controller keeps on ReplicaSets (and, for the
// revision, on the Deployment). Same keys as upstream
// pkg/controller/deployment/util.
const (
	// RevisionAnnotation records the rollout sequence number of a ReplicaSet.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists the older revisions a ReplicaSet served
	// before it was reused by a rollback.
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation is the Deployment's spec.replicas as seen when
	// the ReplicaSet was last scaled. It separates scaling events from rollouts.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation is spec.replicas + maxSurge as seen when the
	// ReplicaSet was last scaled; proportional scaling rounds against it.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"
)

// maxRevHistoryLengthInChars bounds RevisionHistoryAnnotation (upstream
// sync.go: about 100 revisions).
const maxRevHistoryLengthInChars = 2000

// annotationsToSkip are the Deployment annotations that are never copied onto
// its ReplicaSets (and never copied back on rollback).
var annotationsToSkip = map[string]bool{
	corev1.LastAppliedConfigAnnotation: true,
	RevisionAnnotation:                 true,
	RevisionHistoryAnnotation:          true,
	DesiredReplicasAnnotation:          true,
	MaxReplicasAnnotation:              true,
	appsv1.DeprecatedRollbackTo:        true,
}

// SetDeploymentDefaults fills the Deployment fields the API server would
// default (k8s.io/kubernetes/pkg/apis/apps/v1.SetDefaults_Deployment):
// replicas 1, RollingUpdate with 25%/25%, revisionHistoryLimit 10 and
// progressDeadlineSeconds 600. Our Deployment never goes through an API
// server, so callers that want in-cluster behaviour call this once on their
// desired object. Pod template defaults are not applied.
func SetDeploymentDefaults(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = int32Ptr(1)
	}
	strategy := &d.Spec.Strategy
	if strategy.Type == "" {
		strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if strategy.RollingUpdate == nil {
			strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if strategy.RollingUpdate.MaxUnavailable == nil {
			v := intstr.FromString("25%")
			strategy.RollingUpdate.MaxUnavailable = &v
		}
		if strategy.RollingUpdate.MaxSurge == nil {
			v := intstr.FromString("25%")
			strategy.RollingUpdate.MaxSurge = &v
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = int32Ptr(10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = int32Ptr(600)
	}
}

// ---------------------------------------------------------------------------
// Revisions

// SetDeploymentRevision writes revision into the Deployment's revision
// annotation and reports whether it changed (upstream SetDeploymentRevision).
func SetDeploymentRevision(deployment *appsv1.Deployment, revision string) bool {
	if deployment.Annotations == nil {
		deployment.Annotations = map[string]string{}
	}
	if deployment.Annotations[RevisionAnnotation] == revision {
		return false
	}
	deployment.Annotations[RevisionAnnotation] = revision
	return true
}

// Revision returns the revision annotation of obj, 0 when it has none, or the
// parse error (upstream Revision; takes a metav1.Object instead of a
// runtime.Object so no meta.Accessor is needed).
func Revision(obj metav1.Object) (int64, error) {
	v, ok := obj.GetAnnotations()[RevisionAnnotation]
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

// MaxRevision returns the highest revision among the ReplicaSets; unparsable
// revisions are skipped (upstream MaxRevision, without the logger).
func MaxRevision(allRSs []*appsv1.ReplicaSet) int64 {
	var highest int64
	for _, rs := range allRSs {
		if rs == nil {
			continue
		}
		if v, err := Revision(rs); err == nil && v > highest {
			highest = v
		}
	}
	return highest
}

// LastRevision returns the second highest revision among the ReplicaSets, i.e.
// the revision "kubectl rollout undo" goes back to (upstream LastRevision,
// without the logger). A repeated maximum counts twice.
func LastRevision(allRSs []*appsv1.ReplicaSet) int64 {
	var highest, second int64
	for _, rs := range allRSs {
		if rs == nil {
			continue
		}
		v, err := Revision(rs)
		if err != nil {
			continue
		}
		switch {
		case v >= highest:
			second, highest = highest, v
		case v > second:
			second = v
		}
	}
	return second
}

// SetNewReplicaSetAnnotations copies the Deployment's annotations onto newRS,
// raises newRS's revision to newRevision when it is lower (recording the
// replaced revision in RevisionHistoryAnnotation, capped at
// revHistoryLimitInChars characters), and, when the ReplicaSet is about to be
// created (!exists), sets the desired/max replicas annotations. It reports
// whether newRS's annotations changed (upstream SetNewReplicaSetAnnotations,
// without the context). newRS is modified in place.
func SetNewReplicaSetAnnotations(deployment *appsv1.Deployment, newRS *appsv1.ReplicaSet, newRevision string, exists bool, revHistoryLimitInChars int) bool {
	changed := copyDeploymentAnnotationsToReplicaSet(deployment, newRS)
	if newRS.Annotations == nil {
		newRS.Annotations = map[string]string{}
	}

	// The new ReplicaSet's revision must be the highest. Only raise it: old
	// ReplicaSets may have been deleted since it was stamped, which makes
	// newRevision smaller than what it already carries.
	current, hadRevision := newRS.Annotations[RevisionAnnotation]
	currentNum, err := strconv.ParseInt(current, 10, 64)
	if err != nil {
		if current != "" {
			return false // garbage revision on the ReplicaSet: leave it alone
		}
		currentNum = 0
	}
	wantNum, err := strconv.ParseInt(newRevision, 10, 64)
	if err != nil {
		return false
	}
	if currentNum < wantNum {
		newRS.Annotations[RevisionAnnotation] = newRevision
		changed = true
		// A ReplicaSet that already had a revision and gets a new one is being
		// reused by a rollback: remember the revisions it served before.
		if hadRevision {
			appendRevisionHistory(newRS, current, revHistoryLimitInChars)
		}
	}

	if !exists {
		replicas := *deployment.Spec.Replicas
		if SetReplicasAnnotations(newRS, replicas, replicas+MaxSurge(*deployment)) {
			changed = true
		}
	}
	return changed
}

// appendRevisionHistory appends oldRevision to rs's revision history,
// dropping the oldest entries so the annotation stays within limit
// characters; if even oldRevision alone does not fit, history is unchanged.
func appendRevisionHistory(rs *appsv1.ReplicaSet, oldRevision string, limit int) {
	history := rs.Annotations[RevisionHistoryAnnotation]
	entries := strings.Split(history, ",")
	if entries[0] == "" {
		rs.Annotations[RevisionHistoryAnnotation] = oldRevision
		return
	}
	length := len(history) + 1 + len(oldRevision)
	first := 0
	for length > limit && first < len(entries) {
		length -= len(entries[first]) + 1
		first++
	}
	if length > limit {
		return
	}
	kept := append(append([]string{}, entries[first:]...), oldRevision)
	rs.Annotations[RevisionHistoryAnnotation] = strings.Join(kept, ",")
}

// copyDeploymentAnnotationsToReplicaSet copies every annotation of the
// Deployment except annotationsToSkip onto rs and reports whether rs changed.
func copyDeploymentAnnotationsToReplicaSet(deployment *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range deployment.Annotations {
		if annotationsToSkip[k] {
			continue
		}
		if have, ok := rs.Annotations[k]; ok && have == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

// SetDeploymentAnnotationsTo replaces the Deployment's copyable annotations
// with those of the ReplicaSet it rolls back to; the skipped annotations
// (revision, last-applied, ...) keep the Deployment's own values (upstream
// SetDeploymentAnnotationsTo). deployment is modified in place.
func SetDeploymentAnnotationsTo(deployment *appsv1.Deployment, rollbackToRS *appsv1.ReplicaSet) {
	kept := map[string]string{}
	for k, v := range deployment.Annotations {
		if annotationsToSkip[k] {
			kept[k] = v
		}
	}
	for k, v := range rollbackToRS.Annotations {
		if !annotationsToSkip[k] {
			kept[k] = v
		}
	}
	deployment.Annotations = kept
}

// ---------------------------------------------------------------------------
// Desired / max replicas annotations

// SetReplicasAnnotations writes the desired-replicas and max-replicas
// annotations on rs and reports whether either changed (upstream
// SetReplicasAnnotations). rs is modified in place.
func SetReplicasAnnotations(rs *appsv1.ReplicaSet, desiredReplicas, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for key, value := range map[string]string{
		DesiredReplicasAnnotation: strconv.FormatInt(int64(desiredReplicas), 10),
		MaxReplicasAnnotation:     strconv.FormatInt(int64(maxReplicas), 10),
	} {
		if rs.Annotations[key] != value {
			rs.Annotations[key] = value
			changed = true
		}
	}
	return changed
}

// ReplicasAnnotationsNeedUpdate reports whether SetReplicasAnnotations would
// change rs (upstream ReplicasAnnotationsNeedUpdate).
func ReplicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desiredReplicas, maxReplicas int32) bool {
	if rs.Annotations == nil {
		return true
	}
	return rs.Annotations[DesiredReplicasAnnotation] != strconv.FormatInt(int64(desiredReplicas), 10) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.FormatInt(int64(maxReplicas), 10)
}

// GetDesiredReplicasAnnotation returns the desired-replicas annotation of rs
// and whether it is present and a valid non-negative int32 (upstream
// GetDesiredReplicasAnnotation, without the logger).
func GetDesiredReplicasAnnotation(rs *appsv1.ReplicaSet) (int32, bool) {
	v, ok, _ := getNonNegativeInt32FromAnnotation(rs, DesiredReplicasAnnotation)
	return v, ok
}

func getMaxReplicasAnnotation(rs *appsv1.ReplicaSet) (int32, bool) {
	v, ok, _ := getNonNegativeInt32FromAnnotation(rs, MaxReplicasAnnotation)
	return v, ok
}

func getNonNegativeInt32FromAnnotation(rs *appsv1.ReplicaSet, key string) (int32, bool, error) {
	raw, ok := rs.Annotations[key]
	if !ok {
		return 0, false, nil
	}
	v, err := strconv.ParseUint(raw, 10, 32)
	if err != nil {
		return 0, false, err
	}
	if v > math.MaxInt32 {
		return 0, false, fmt.Errorf("value %d is out of range (higher than %d)", v, math.MaxInt32)
	}
	return int32(v), true, nil
}

// ---------------------------------------------------------------------------
// Surge / unavailability

// IsRollingUpdate reports whether the Deployment uses the RollingUpdate
// strategy (upstream IsRollingUpdate).
func IsRollingUpdate(deployment *appsv1.Deployment) bool {
	return deployment.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// ResolveFenceposts turns maxSurge and maxUnavailable into absolute numbers for
// desired replicas: surge rounds percentages up, unavailable rounds them down,
// a nil value counts as 0, and if both end up 0 maxUnavailable becomes 1 so the
// rollout can make progress even when surging is impossible (upstream
// ResolveFenceposts).
func ResolveFenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (int32, int32, error) {
	zero := intstr.FromInt32(0)
	surge, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxSurge, zero), int(desired), true)
	if err != nil {
		return 0, 0, err
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxUnavailable, zero), int(desired), false)
	if err != nil {
		return 0, 0, err
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return int32(surge), int32(unavailable), nil
}

// rollingFenceposts resolves the Deployment's fenceposts, ignoring errors as
// upstream does ("caught by validation").
func rollingFenceposts(deployment *appsv1.Deployment) (surge, unavailable int32) {
	var maxSurge, maxUnavailable *intstr.IntOrString
	if ru := deployment.Spec.Strategy.RollingUpdate; ru != nil {
		maxSurge, maxUnavailable = ru.MaxSurge, ru.MaxUnavailable
	}
	surge, unavailable, _ = ResolveFenceposts(maxSurge, maxUnavailable, *deployment.Spec.Replicas)
	return surge, unavailable
}

// MaxSurge returns how many pods above spec.replicas a rolling Deployment may
// run; 0 for Recreate (upstream MaxSurge).
func MaxSurge(deployment appsv1.Deployment) int32 {
	if !IsRollingUpdate(&deployment) {
		return 0
	}
	surge, _ := rollingFenceposts(&deployment)
	return surge
}

// MaxUnavailable returns how many pods below spec.replicas a rolling
// Deployment may drop to, capped at spec.replicas; 0 for Recreate or zero
// replicas (upstream MaxUnavailable).
func MaxUnavailable(deployment appsv1.Deployment) int32 {
	if !IsRollingUpdate(&deployment) || *deployment.Spec.Replicas == 0 {
		return 0
	}
	_, unavailable := rollingFenceposts(&deployment)
	return min(unavailable, *deployment.Spec.Replicas)
}

// MinAvailable returns spec.replicas - MaxUnavailable for rolling
// Deployments and 0 otherwise (upstream MinAvailable).
func MinAvailable(deployment *appsv1.Deployment) int32 {
	if !IsRollingUpdate(deployment) {
		return 0
	}
	return *deployment.Spec.Replicas - MaxUnavailable(*deployment)
}

// NewRSNewReplicas returns the size the new ReplicaSet may have now. Rolling:
// grow it as far as spec.replicas+maxSurge total pods allows, never beyond
// spec.replicas. Recreate: spec.replicas (upstream NewRSNewReplicas).
func NewRSNewReplicas(deployment *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	switch deployment.Spec.Strategy.Type {
	case appsv1.RollingUpdateDeploymentStrategyType:
		// Unlike ResolveFenceposts, a nil maxSurge is an error here (as
		// upstream); validation and defaulting never let it through.
		var maxSurge *intstr.IntOrString
		if ru := deployment.Spec.Strategy.RollingUpdate; ru != nil {
			maxSurge = ru.MaxSurge
		}
		surge, err := intstr.GetScaledValueFromIntOrPercent(maxSurge, int(*deployment.Spec.Replicas), true)
		if err != nil {
			return 0, err
		}
		current := GetReplicaCountForReplicaSets(allRSs)
		ceiling := *deployment.Spec.Replicas + int32(surge)
		if current >= ceiling {
			return *newRS.Spec.Replicas, nil
		}
		grow := min(ceiling-current, *deployment.Spec.Replicas-*newRS.Spec.Replicas)
		return *newRS.Spec.Replicas + grow, nil
	case appsv1.RecreateDeploymentStrategyType:
		return *deployment.Spec.Replicas, nil
	default:
		return 0, fmt.Errorf("deployment type %v isn't supported", deployment.Spec.Strategy.Type)
	}
}

// IsSaturated reports whether rs owns the whole Deployment: its size, its
// desired-replicas annotation and its available pods all equal spec.replicas
// (upstream IsSaturated).
func IsSaturated(deployment *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, err := strconv.Atoi(rs.Annotations[DesiredReplicasAnnotation])
	if err != nil {
		return false
	}
	replicas := *deployment.Spec.Replicas
	return *rs.Spec.Replicas == replicas &&
		int32(desired) == replicas &&
		rs.Status.AvailableReplicas == replicas
}

// GetReplicaSetProportion returns how many replicas rs should gain (or lose,
// when negative) when deploymentReplicasToAdd replicas are spread over the
// active ReplicaSets and deploymentReplicasAdded have been handed out already.
// It never hands out more than what is left (upstream
// GetReplicaSetProportion, without the logger).
func GetReplicaSetProportion(rs *appsv1.ReplicaSet, d appsv1.Deployment, deploymentReplicasToAdd, deploymentReplicasAdded int32) int32 {
	if rs == nil || *rs.Spec.Replicas == 0 || deploymentReplicasToAdd == 0 || deploymentReplicasToAdd == deploymentReplicasAdded {
		return 0
	}
	fraction := getReplicaSetFraction(*rs, d)
	left := deploymentReplicasToAdd - deploymentReplicasAdded
	if deploymentReplicasToAdd > 0 {
		return min(fraction, left)
	}
	return max(fraction, left)
}

// getReplicaSetFraction estimates rs's share of a resize: its size scaled by
// (new spec.replicas+maxSurge) / max-replicas annotation, rounded, minus its
// current size. Without a usable annotation it falls back to status.replicas.
func getReplicaSetFraction(rs appsv1.ReplicaSet, d appsv1.Deployment) int32 {
	if *d.Spec.Replicas == 0 {
		return -*rs.Spec.Replicas
	}
	newMax := *d.Spec.Replicas + MaxSurge(d)
	oldMax, ok := getMaxReplicasAnnotation(&rs)
	if !ok || oldMax == 0 {
		// Annotation missing or tampered with: use the current size of the
		// Deployment; with no pods at all there is nothing to scale from.
		oldMax = d.Status.Replicas
		if oldMax == 0 {
			return 0
		}
	}
	// int32 multiplication first, as upstream does.
	scaled := float64(*rs.Spec.Replicas*newMax) / float64(oldMax)
	return int32(math.Round(scaled)) - *rs.Spec.Replicas
}

// ---------------------------------------------------------------------------
// Counting

// GetReplicaCountForReplicaSets sums spec.replicas (upstream
// GetReplicaCountForReplicaSets). nil entries are ignored.
func GetReplicaCountForReplicaSets(replicaSets []*appsv1.ReplicaSet) int32 {
	return sumReplicaSets(replicaSets, func(rs *appsv1.ReplicaSet) int32 { return *rs.Spec.Replicas })
}

// GetActualReplicaCountForReplicaSets sums status.replicas (upstream
// GetActualReplicaCountForReplicaSets).
func GetActualReplicaCountForReplicaSets(replicaSets []*appsv1.ReplicaSet) int32 {
	return sumReplicaSets(replicaSets, func(rs *appsv1.ReplicaSet) int32 { return rs.Status.Replicas })
}

// GetReadyReplicaCountForReplicaSets sums status.readyReplicas (upstream
// GetReadyReplicaCountForReplicaSets).
func GetReadyReplicaCountForReplicaSets(replicaSets []*appsv1.ReplicaSet) int32 {
	return sumReplicaSets(replicaSets, func(rs *appsv1.ReplicaSet) int32 { return rs.Status.ReadyReplicas })
}

// GetAvailableReplicaCountForReplicaSets sums status.availableReplicas
// (upstream GetAvailableReplicaCountForReplicaSets).
func GetAvailableReplicaCountForReplicaSets(replicaSets []*appsv1.ReplicaSet) int32 {
	return sumReplicaSets(replicaSets, func(rs *appsv1.ReplicaSet) int32 { return rs.Status.AvailableReplicas })
}

func sumReplicaSets(replicaSets []*appsv1.ReplicaSet, count func(*appsv1.ReplicaSet) int32) int32 {
	var total int32
	for _, rs := range replicaSets {
		if rs != nil {
			total += count(rs)
		}
	}
	return total
}

// GetTerminatingReplicaCountForReplicaSets sums status.terminatingReplicas.
// ReplicaSets never observed by their controller (observedGeneration 0 and no
// count) are skipped; if any observed ReplicaSet does not report the count the
// sum is unknown and nil is returned (upstream
// GetTerminatingReplicaCountForReplicaSets).
func GetTerminatingReplicaCountForReplicaSets(replicaSets []*appsv1.ReplicaSet) *int32 {
	var total int32
	for _, rs := range replicaSets {
		switch {
		case rs == nil:
		case rs.Status.TerminatingReplicas == nil && rs.Status.ObservedGeneration == 0:
		case rs.Status.TerminatingReplicas == nil:
			return nil
		default:
			total += *rs.Status.TerminatingReplicas
		}
	}
	return &total
}

// ---------------------------------------------------------------------------
// Finding the new and old ReplicaSets

// EqualIgnoreHash reports whether two pod templates are semantically equal
// once their pod-template-hash labels are ignored (upstream EqualIgnoreHash).
// Neither argument is modified.
func EqualIgnoreHash(template1, template2 *corev1.PodTemplateSpec) bool {
	a, b := template1.DeepCopy(), template2.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return apiequality.Semantic.DeepEqual(a, b)
}

// FindNewReplicaSet returns the ReplicaSet whose template matches the
// Deployment's, or nil. If several match, the oldest wins (upstream
// FindNewReplicaSet; rsList itself is not reordered).
func FindNewReplicaSet(deployment *appsv1.Deployment, rsList []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	for _, rs := range sortedByCreationTimestamp(rsList) {
		if EqualIgnoreHash(&rs.Spec.Template, &deployment.Spec.Template) {
			return rs
		}
	}
	return nil
}

// FindOldReplicaSets returns, oldest first, the ReplicaSets other than the new
// one: first those with spec.replicas != 0, then all of them (upstream
// FindOldReplicaSets). ReplicaSets are identified by UID; objects without a
// UID are compared by namespace/name.
func FindOldReplicaSets(deployment *appsv1.Deployment, rsList []*appsv1.ReplicaSet) ([]*appsv1.ReplicaSet, []*appsv1.ReplicaSet) {
	newRS := FindNewReplicaSet(deployment, rsList)
	var required, all []*appsv1.ReplicaSet
	for _, rs := range sortedByCreationTimestamp(rsList) {
		if newRS != nil && sameReplicaSet(rs, newRS) {
			continue
		}
		all = append(all, rs)
		if *rs.Spec.Replicas != 0 {
			required = append(required, rs)
		}
	}
	return required, all
}

func sameReplicaSet(a, b *appsv1.ReplicaSet) bool {
	if a.UID != "" || b.UID != "" {
		return a.UID == b.UID
	}
	return a.Namespace == b.Namespace && a.Name == b.Name
}

// FindActiveOrLatest returns the only ReplicaSet with replicas, or, when none
// has any, the new ReplicaSet or else the newest old one; nil when several are
// active (upstream FindActiveOrLatest; oldRSs is not reordered).
func FindActiveOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	newestFirst := reversed(sortedByCreationTimestamp(oldRSs))
	active := FilterActiveReplicaSets(append(newestFirst, newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return newestFirst[0]
	case 1:
		return active[0]
	default:
		return nil
	}
}

// SetFromReplicaSetTemplate copies template into the Deployment's pod
// template, dropping the pod-template-hash label (upstream
// SetFromReplicaSetTemplate). deployment is modified in place and returned.
func SetFromReplicaSetTemplate(deployment *appsv1.Deployment, template corev1.PodTemplateSpec) *appsv1.Deployment {
	template = *template.DeepCopy()
	deployment.Spec.Template.ObjectMeta = template.ObjectMeta
	deployment.Spec.Template.Spec = template.Spec
	deployment.Spec.Template.Labels = cloneWithoutLabel(template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return deployment
}

// ---------------------------------------------------------------------------
// Filters and orderings (upstream pkg/controller/controller_utils.go)

// FilterActiveReplicaSets returns the non-nil ReplicaSets with spec.replicas >
// 0 (upstream controller.FilterActiveReplicaSets).
func FilterActiveReplicaSets(replicaSets []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	return filterReplicaSets(replicaSets, func(rs *appsv1.ReplicaSet) bool {
		return rs != nil && *rs.Spec.Replicas > 0
	})
}

func filterReplicaSets(replicaSets []*appsv1.ReplicaSet, keep func(*appsv1.ReplicaSet) bool) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range replicaSets {
		if keep(rs) {
			out = append(out, rs)
		}
	}
	return out
}

// ReplicaSetsByCreationTimestamp orders oldest first, then by name (upstream
// controller.ReplicaSetsByCreationTimestamp).
type ReplicaSetsByCreationTimestamp []*appsv1.ReplicaSet

func (o ReplicaSetsByCreationTimestamp) Len() int      { return len(o) }
func (o ReplicaSetsByCreationTimestamp) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ReplicaSetsByCreationTimestamp) Less(i, j int) bool {
	if o[i].CreationTimestamp.Equal(&o[j].CreationTimestamp) {
		return o[i].Name < o[j].Name
	}
	return o[i].CreationTimestamp.Before(&o[j].CreationTimestamp)
}

// ReplicaSetsBySizeOlder orders largest first; equal sizes oldest first
// (upstream controller.ReplicaSetsBySizeOlder). Used when scaling down.
type ReplicaSetsBySizeOlder []*appsv1.ReplicaSet

func (o ReplicaSetsBySizeOlder) Len() int      { return len(o) }
func (o ReplicaSetsBySizeOlder) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ReplicaSetsBySizeOlder) Less(i, j int) bool {
	if *o[i].Spec.Replicas == *o[j].Spec.Replicas {
		return ReplicaSetsByCreationTimestamp(o).Less(i, j)
	}
	return *o[i].Spec.Replicas > *o[j].Spec.Replicas
}

// ReplicaSetsBySizeNewer orders largest first; equal sizes newest first
// (upstream controller.ReplicaSetsBySizeNewer). Used when scaling up.
type ReplicaSetsBySizeNewer []*appsv1.ReplicaSet

func (o ReplicaSetsBySizeNewer) Len() int      { return len(o) }
func (o ReplicaSetsBySizeNewer) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ReplicaSetsBySizeNewer) Less(i, j int) bool {
	if *o[i].Spec.Replicas == *o[j].Spec.Replicas {
		return ReplicaSetsByCreationTimestamp(o).Less(j, i)
	}
	return *o[i].Spec.Replicas > *o[j].Spec.Replicas
}

// ReplicaSetsByRevision orders by revision ascending, falling back to
// creation timestamp when either revision is missing/unparsable or both are
// equal (upstream ReplicaSetsByRevision).
type ReplicaSetsByRevision []*appsv1.ReplicaSet

func (o ReplicaSetsByRevision) Len() int      { return len(o) }
func (o ReplicaSetsByRevision) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ReplicaSetsByRevision) Less(i, j int) bool {
	r1, err1 := Revision(o[i])
	r2, err2 := Revision(o[j])
	if err1 != nil || err2 != nil || r1 == r2 {
		return ReplicaSetsByCreationTimestamp(o).Less(i, j)
	}
	return r1 < r2
}

// sortedByCreationTimestamp returns a sorted copy; the input is untouched.
func sortedByCreationTimestamp(rsList []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	out := append([]*appsv1.ReplicaSet(nil), rsList...)
	sort.Sort(ReplicaSetsByCreationTimestamp(out))
	return out
}

// ---------------------------------------------------------------------------
// Small helpers

func int32Ptr(v int32) *int32 { return &v }

// cloneWithLabel returns a copy of labels with key=value added (never nil).
func cloneWithLabel(labels map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	out[key] = value
	return out
}

// cloneWithoutLabel returns a copy of labels without key (never nil).
func cloneWithoutLabel(labels map[string]string, key string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if k != key {
			out[k] = v
		}
	}
	return out
}
