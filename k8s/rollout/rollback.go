package rollout

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RollbackResult is the outcome of a rollback (upstream rollback and
// rollbackToTemplate, whose events become Reason and Message).
type RollbackResult struct {
	// Deployment is a copy of the Deployment to adopt as the new desired
	// state: template and copyable annotations taken from the target
	// ReplicaSet when Performed, and the rollbackTo annotation cleared in
	// every case.
	Deployment *appsv1.Deployment
	// Performed reports whether the template changed.
	Performed bool
	// Revision is the revision rolled back to (resolved when 0 was asked).
	Revision int64
	// EventType is corev1.EventTypeNormal or corev1.EventTypeWarning.
	EventType string
	// Reason is RollbackDone, RollbackTemplateUnchanged or
	// RollbackRevisionNotFound.
	Reason string
	// Message is upstream's event message.
	Message string
}

// RollbackToRevision is "kubectl rollout undo --to-revision": it finds the
// ReplicaSet with the given revision (0 means the previous one, LastRevision)
// among rsList and returns the Deployment with that ReplicaSet's template
// (upstream rollback). If the Deployment's new ReplicaSet does not exist yet
// it counts as existing with revision MaxRevision+1, as upstream creates it
// before rolling back. d is not modified.
func RollbackToRevision(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, revision int64) RollbackResult {
	allRSs := append([]*appsv1.ReplicaSet(nil), rsList...)
	if FindNewReplicaSet(d, rsList) == nil {
		allRSs = append(allRSs, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
				RevisionAnnotation: strconv.FormatInt(MaxRevision(rsList)+1, 10),
			}},
			Spec: appsv1.ReplicaSetSpec{Template: *d.Spec.Template.DeepCopy()},
		})
	}
	return rollback(d, allRSs, revision)
}

// rollback implements RollbackToRevision on the Deployment's ReplicaSets,
// the new one included.
func rollback(d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, revision int64) RollbackResult {
	notFound := func(msg string) RollbackResult {
		out := d.DeepCopy()
		setRollbackTo(out, nil)
		return RollbackResult{Deployment: out, Revision: revision, EventType: corev1.EventTypeWarning, Reason: RollbackRevisionNotFound, Message: msg}
	}
	if revision == 0 {
		if revision = LastRevision(allRSs); revision == 0 {
			return notFound("Unable to find last revision.")
		}
	}
	for _, rs := range allRSs {
		if v, err := Revision(rs); err == nil && v == revision {
			out, performed := RollbackToTemplate(d, rs)
			res := RollbackResult{Deployment: out, Performed: performed, Revision: revision}
			if performed {
				res.EventType, res.Reason = corev1.EventTypeNormal, RollbackDone
				res.Message = fmt.Sprintf("Rolled back deployment %q to revision %d", d.Name, revision)
			} else {
				res.EventType, res.Reason = corev1.EventTypeWarning, RollbackTemplateUnchanged
				res.Message = fmt.Sprintf("The rollback revision contains the same template as current deployment %q", d.Name)
			}
			return res
		}
	}
	return notFound("Unable to find the revision to rollback to.")
}

// RollbackToTemplate returns a copy of d with rs's pod template (without the
// pod-template-hash label) and rs's copyable annotations, and reports
// whether anything changed; if the templates already match only the
// rollbackTo annotation is cleared (upstream rollbackToTemplate). d is not
// modified.
func RollbackToTemplate(d *appsv1.Deployment, rs *appsv1.ReplicaSet) (*appsv1.Deployment, bool) {
	out := d.DeepCopy()
	performed := false
	if !EqualIgnoreHash(&d.Spec.Template, &rs.Spec.Template) {
		SetFromReplicaSetTemplate(out, rs.Spec.Template)
		// Take the annotations of the revision too (e.g. change-cause), or
		// the current ones would be copied onto the rolled back ReplicaSet.
		SetDeploymentAnnotationsTo(out, rs)
		performed = true
	}
	setRollbackTo(out, nil)
	return out, performed
}

// getRollbackTo returns the revision in the deprecated rollbackTo annotation
// (apps/v1 round-trip of extensions/v1beta1 spec.rollbackTo), if any valid.
func getRollbackTo(d *appsv1.Deployment) (int64, bool) {
	raw := d.Annotations[appsv1.DeprecatedRollbackTo]
	if raw == "" {
		return 0, false
	}
	revision, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, false // invalid: ignored, as upstream
	}
	return revision, true
}

// setRollbackTo sets or (nil) clears the deprecated rollbackTo annotation.
func setRollbackTo(d *appsv1.Deployment, revision *int64) {
	if revision == nil {
		delete(d.Annotations, appsv1.DeprecatedRollbackTo)
		return
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[appsv1.DeprecatedRollbackTo] = strconv.FormatInt(*revision, 10)
}
