package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// rollbackFixture: a Deployment on revision 3 (image v3) with older
// ReplicaSets for revisions 1 (v1) and 2 (v2).
func rollbackFixture() (*appsv1.Deployment, map[int]*appsv1.ReplicaSet) {
	d := newDeployment("web", 2, nil, intOrStr(1), intOrStr(0), map[string]string{"app": "web"})
	d.Annotations = map[string]string{RevisionAnnotation: "3", "change-cause": "v3", corev1.LastAppliedConfigAnnotation: "{}"}
	d.Spec.Template.Spec.Containers[0].Image = "web:v3"
	rss := map[int]*appsv1.ReplicaSet{}
	for rev, image := range map[int]string{1: "web:v1", 2: "web:v2", 3: "web:v3"} {
		r := newReplicaSet(d, "web-"+image[4:], 0)
		r.Spec.Template.Spec.Containers[0].Image = image
		r.Spec.Template.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "hash-" + image[4:]}
		r.Annotations = map[string]string{RevisionAnnotation: itoa(int32(rev)), "change-cause": image[4:], DesiredReplicasAnnotation: "2"}
		rss[rev] = r
	}
	return d, rss
}

func TestRollbackToRevision(t *testing.T) {
	rolledBackTo := func(image, changeCause string) *appsv1.Deployment {
		d, _ := rollbackFixture()
		d.Spec.Template.Spec.Containers[0].Image = image
		d.Spec.Template.Labels = map[string]string{"app": "web"}
		d.Annotations = map[string]string{RevisionAnnotation: "3", "change-cause": changeCause, corev1.LastAppliedConfigAnnotation: "{}"}
		return d
	}
	unchanged := func() *appsv1.Deployment { d, _ := rollbackFixture(); return d }

	tests := []struct {
		name      string
		rss       []int // revisions present
		revision  int64
		want      *appsv1.Deployment
		performed bool
		revisionR int64
		eventType string
		reason    string
		message   string
	}{
		{"0 means the previous revision", []int{1, 2, 3}, 0, rolledBackTo("web:v2", "v2"), true, 2, corev1.EventTypeNormal, RollbackDone, `Rolled back deployment "web" to revision 2`},
		{"explicit revision", []int{1, 2, 3}, 1, rolledBackTo("web:v1", "v1"), true, 1, corev1.EventTypeNormal, RollbackDone, `Rolled back deployment "web" to revision 1`},
		{"current revision: template unchanged", []int{1, 2, 3}, 3, unchanged(), false, 3, corev1.EventTypeWarning, RollbackTemplateUnchanged, `The rollback revision contains the same template as current deployment "web"`},
		{"unknown revision", []int{1, 2, 3}, 7, unchanged(), false, 7, corev1.EventTypeWarning, RollbackRevisionNotFound, "Unable to find the revision to rollback to."},
		{"no previous revision", []int{3}, 0, unchanged(), false, 0, corev1.EventTypeWarning, RollbackRevisionNotFound, "Unable to find last revision."},
		{"new replica set not created yet counts as the latest revision", []int{1}, 0, rolledBackTo("web:v1", "v1"), true, 1, corev1.EventTypeNormal, RollbackDone, `Rolled back deployment "web" to revision 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, all := rollbackFixture()
			d.Annotations[appsv1.DeprecatedRollbackTo] = "5" // always cleared
			var rsList []*appsv1.ReplicaSet
			for _, rev := range tt.rss {
				rsList = append(rsList, all[rev])
			}
			before, beforeRSs := d.DeepCopy(), deepCopies(rsList)

			res := RollbackToRevision(d, rsList, tt.revision)
			assert.Equal(t, tt.want, res.Deployment)
			assert.Equal(t, tt.performed, res.Performed)
			assert.Equal(t, tt.revisionR, res.Revision)
			assert.Equal(t, tt.eventType, res.EventType)
			assert.Equal(t, tt.reason, res.Reason)
			assert.Equal(t, tt.message, res.Message)
			assert.Equal(t, before, d, "deployment must not be mutated")
			requireUnchanged(t, beforeRSs, rsList)
		})
	}
}

func TestRollbackToTemplate(t *testing.T) {
	d, rss := rollbackFixture()
	d.Annotations[appsv1.DeprecatedRollbackTo] = "1"

	out, performed := RollbackToTemplate(d, rss[1])
	assert.True(t, performed)
	assert.Equal(t, "web:v1", out.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, map[string]string{"app": "web"}, out.Spec.Template.Labels, "pod-template-hash label removed")
	assert.Equal(t, map[string]string{RevisionAnnotation: "3", "change-cause": "v1", corev1.LastAppliedConfigAnnotation: "{}"}, out.Annotations)
	assert.Equal(t, "1", d.Annotations[appsv1.DeprecatedRollbackTo], "input keeps its annotation")

	out, performed = RollbackToTemplate(d, rss[3])
	assert.False(t, performed)
	want := d.DeepCopy()
	delete(want.Annotations, appsv1.DeprecatedRollbackTo)
	assert.Equal(t, want, out)
}

func TestRollbackToAnnotation(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        int64
		ok          bool
	}{
		{"absent", nil, 0, false},
		{"empty", map[string]string{appsv1.DeprecatedRollbackTo: ""}, 0, false},
		{"invalid is ignored", map[string]string{appsv1.DeprecatedRollbackTo: "x"}, 0, false},
		{"zero means last", map[string]string{appsv1.DeprecatedRollbackTo: "0"}, 0, true},
		{"revision", map[string]string{appsv1.DeprecatedRollbackTo: "4"}, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{}
			d.Annotations = tt.annotations
			got, ok := getRollbackTo(d)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.ok, ok)
		})
	}

	d := &appsv1.Deployment{}
	setRollbackTo(d, ptrTo(int64(3)))
	assert.Equal(t, map[string]string{appsv1.DeprecatedRollbackTo: "3"}, d.Annotations)
	setRollbackTo(d, nil)
	assert.Empty(t, d.Annotations)
}
