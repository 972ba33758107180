package rollout

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Fixtures shaped like upstream's test helpers so ported tables keep their
// inputs.

var noTimestamp = metav1.Time{}

func ptrTo[T any](v T) *T { return &v }

func intOrStr(v int32) *intstr.IntOrString { return ptrTo(intstr.FromInt32(v)) }

func pct(s string) *intstr.IntOrString { return ptrTo(intstr.FromString(s)) }

// rs is upstream's rs(): a named ReplicaSet of the given size.
func rs(name string, replicas int32, selector map[string]string, timestamp metav1.Time) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			UID:               types.UID("uid-" + name),
			CreationTimestamp: timestamp,
			Namespace:         metav1.NamespaceDefault,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptrTo(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{},
		},
	}
}

// newRSWithStatus is upstream's newRSWithStatus.
func newRSWithStatus(name string, specReplicas, statusReplicas int32, selector map[string]string) *appsv1.ReplicaSet {
	r := rs(name, specReplicas, selector, noTimestamp)
	r.Status = appsv1.ReplicaSetStatus{Replicas: statusReplicas}
	return r
}

// newRSWithAvailable is upstream's newRSWithAvailable.
func newRSWithAvailable(name string, specReplicas, statusReplicas, availableReplicas int32) *appsv1.ReplicaSet {
	r := rs(name, specReplicas, nil, noTimestamp)
	r.Status = appsv1.ReplicaSetStatus{Replicas: statusReplicas, AvailableReplicas: availableReplicas}
	return r
}

// newDeployment is upstream's newDeployment: RollingUpdate with maxSurge and
// maxUnavailable defaulting to 0 (so the fenceposts resolve to 0/1).
func newDeployment(name string, replicas int32, revisionHistoryLimit *int32, maxSurge, maxUnavailable *intstr.IntOrString, selector map[string]string) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			UID:         types.UID("uid-deployment-" + name),
			Name:        name,
			Namespace:   metav1.NamespaceDefault,
			Annotations: map[string]string{},
		},
		Spec: appsv1.DeploymentSpec{
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: intOrStr(0),
					MaxSurge:       intOrStr(0),
				},
			},
			Replicas: ptrTo(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Image: "foo/bar"}}},
			},
			RevisionHistoryLimit: revisionHistoryLimit,
		},
	}
	if maxSurge != nil {
		d.Spec.Strategy.RollingUpdate.MaxSurge = maxSurge
	}
	if maxUnavailable != nil {
		d.Spec.Strategy.RollingUpdate.MaxUnavailable = maxUnavailable
	}
	return d
}

// newReplicaSet is upstream's newReplicaSet: a ReplicaSet with d's template.
func newReplicaSet(d *appsv1.Deployment, name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		TypeMeta: metav1.TypeMeta{Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			UID:       types.UID("uid-" + name),
			Namespace: metav1.NamespaceDefault,
			Labels:    d.Spec.Selector.MatchLabels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Selector: d.Spec.Selector.DeepCopy(),
			Replicas: ptrTo(replicas),
			Template: *d.Spec.Template.DeepCopy(),
		},
	}
}

// generateDeployment is upstream util's generateDeployment.
func generateDeployment(image string) appsv1.Deployment {
	podLabels := map[string]string{"name": image}
	return appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: image, Annotations: map[string]string{}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:                   image,
						Image:                  image,
						ImagePullPolicy:        corev1.PullAlways,
						TerminationMessagePath: corev1.TerminationMessagePathDefault,
					}},
					DNSPolicy:                     corev1.DNSClusterFirst,
					TerminationGracePeriodSeconds: ptrTo(int64(30)),
					RestartPolicy:                 corev1.RestartPolicyAlways,
					SecurityContext:               &corev1.PodSecurityContext{},
					EnableServiceLinks:            ptrTo(corev1.DefaultEnableServiceLinks),
				},
			},
		},
	}
}

var generatedRS int

// generateRS is upstream util's generateRS: a zero-sized ReplicaSet with the
// Deployment's template and a unique name and UID.
func generateRS(d appsv1.Deployment) appsv1.ReplicaSet {
	generatedRS++
	template := d.Spec.Template.DeepCopy()
	name := d.Name + "-" + strconv.Itoa(generatedRS)
	return appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			UID:    types.UID("uid-" + name),
			Name:   name,
			Labels: template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptrTo(int32(0)),
			Template: *template,
			Selector: &metav1.LabelSelector{MatchLabels: template.Labels},
		},
	}
}

// withRevision sets the revision annotation.
func withRevision(r *appsv1.ReplicaSet, revision string) *appsv1.ReplicaSet {
	if r.Annotations == nil {
		r.Annotations = map[string]string{}
	}
	r.Annotations[RevisionAnnotation] = revision
	return r
}

// at returns a fixed time minutes after a base instant.
func at(minutes int) time.Time {
	return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(minutes) * time.Minute)
}

// sizes returns name → spec.replicas after applying ops to the given
// ReplicaSets (later ops win).
func sizesAfter(rss []*appsv1.ReplicaSet, ops []ScaleOp) map[string]int32 {
	out := map[string]int32{}
	for _, r := range rss {
		if r != nil {
			out[r.Name] = *r.Spec.Replicas
		}
	}
	for _, op := range ops {
		out[op.ReplicaSet] = op.To
	}
	return out
}

// deepCopies snapshots ReplicaSets to check that nothing was mutated.
func deepCopies(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	if rss == nil {
		return nil
	}
	out := make([]*appsv1.ReplicaSet, len(rss))
	for i, r := range rss {
		if r != nil {
			out[i] = r.DeepCopy()
		}
	}
	return out
}

func requireUnchanged(t *testing.T, before, after []*appsv1.ReplicaSet) {
	t.Helper()
	require.Equal(t, before, after, "inputs must not be mutated")
}
