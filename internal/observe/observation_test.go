package observe

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/rollout"
)

func rs(service, revision, desired string, spec, available int32) *appsv1.ReplicaSet {
	r := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: service + "-" + revision, Labels: map[string]string{manifest.ServiceLabel: service},
			Annotations: map[string]string{rollout.RevisionAnnotation: revision}},
		Spec:   appsv1.ReplicaSetSpec{Replicas: &spec},
		Status: appsv1.ReplicaSetStatus{AvailableReplicas: available},
	}
	if desired != "" {
		r.Annotations[rollout.DesiredReplicasAnnotation] = desired
	}
	return r
}

// generation sets r's generation and its status's observed generation.
func generation(r *appsv1.ReplicaSet, gen, observed int64) *appsv1.ReplicaSet {
	r.Generation, r.Status.ObservedGeneration = gen, observed
	return r
}

// What a lease's services look like to the health verdict: desired comes
// from the newest revision's desired-replicas annotation, which a scale by
// hand does not touch (issue 11.1: a ReplicaSet scaled to 0 by hand read
// as 0 desired, 0 available: healthy).
func TestObserveReplicaSets(t *testing.T) {
	cases := []struct {
		name    string
		rs      []*appsv1.ReplicaSet
		want    map[string]ServiceHealth
		healthy bool
	}{
		{"all available", []*appsv1.ReplicaSet{rs("web", "1", "3", 3, 3)},
			map[string]ServiceHealth{"web": {Service: "web", Desired: 3, Available: 3}}, true},
		{"scaled to 0 by hand", []*appsv1.ReplicaSet{rs("web", "1", "3", 0, 0)},
			map[string]ServiceHealth{"web": {Service: "web", Desired: 3, Available: 0}}, false},
		{"mid-rollout: the old revision's stale annotation does not count",
			[]*appsv1.ReplicaSet{rs("web", "1", "6", 0, 0), rs("web", "2", "3", 3, 3)},
			map[string]ServiceHealth{"web": {Service: "web", Desired: 3, Available: 3}}, true},
		{"revision 10 is newer than revision 9", []*appsv1.ReplicaSet{rs("web", "10", "2", 2, 2), rs("web", "9", "5", 0, 0)},
			map[string]ServiceHealth{"web": {Service: "web", Desired: 2, Available: 2}}, true},
		{"no annotation: the spec's sum", []*appsv1.ReplicaSet{rs("api", "1", "", 2, 1)},
			map[string]ServiceHealth{"api": {Service: "api", Desired: 2, Available: 1}}, false},
		{"two services", []*appsv1.ReplicaSet{rs("web", "1", "1", 1, 1), rs("api", "1", "2", 2, 2)},
			map[string]ServiceHealth{"web": {Service: "web", Desired: 1, Available: 1}, "api": {Service: "api", Desired: 2, Available: 2}}, true},
		// Guards the dip of a ReplicaSet scaled to 0 by hand against its
		// controller's status: written before its pod cache had the
		// deletions, it said 3 available (observedGeneration current) for
		// a spec of 0, and the observer told the workflow "healthy"
		// between two "below" (CI runs 58 and 59, and a local run, read
		// from the lease's history: three observations taken for one
		// change).
		{"scaled to 0, the pods being deleted still counted", []*appsv1.ReplicaSet{generation(rs("web", "1", "3", 0, 3), 2, 2)},
			map[string]ServiceHealth{"web": {Service: "web", Desired: 3, Available: 0}}, false},
		{"scaled to 0, the status behind the spec", []*appsv1.ReplicaSet{generation(rs("web", "1", "3", 0, 3), 2, 1)},
			map[string]ServiceHealth{"web": {Service: "web", Desired: 3, Available: 0}}, false},
		{"scaled up, the status behind the spec", []*appsv1.ReplicaSet{generation(rs("web", "1", "5", 5, 3), 2, 1)},
			map[string]ServiceHealth{"web": {Service: "web", Desired: 5, Available: 3}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ObserveReplicaSets(c.rs)
			assert.Equal(t, c.want, got)
			o := Observation{Services: got}
			assert.Equal(t, c.healthy, o.Healthy())
		})
	}
}

// The key changes with what a workflow decides on, not with pod churn.
func TestObservationKey(t *testing.T) {
	a := Observation{Services: map[string]ServiceHealth{"web": {Desired: 3, Available: 3}, "api": {Desired: 1, Available: 2}}}
	b := Observation{Services: map[string]ServiceHealth{"api": {Desired: 1, Available: 1}, "web": {Desired: 3, Available: 4}}}
	assert.Equal(t, a.Key(), b.Key(), "available counts above desired are one state")
	c := Observation{Services: map[string]ServiceHealth{"api": {Desired: 1, Available: 0}, "web": {Desired: 3, Available: 3}}}
	assert.NotEqual(t, a.Key(), c.Key())
	assert.NotEqual(t, a.Key(), (&Observation{Services: a.Services, Closed: true}).Key())
	assert.NotEqual(t, a.Key(), (&Observation{Unknown: true}).Key())
	assert.NotEqual(t, a.Key(), (&Observation{Services: map[string]ServiceHealth{"web": {Desired: 3, Available: 3}}}).Key(), "a service gone")
}

// A stateful service's health is its StatefulSet's (issue 39): desired
// its spec's replicas, available its status's, never more than the spec;
// a service's ReplicaSets and another's StatefulSet are added side by side.
func TestObserveStatefulSets(t *testing.T) {
	sts := func(service string, spec, available int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: service, Labels: map[string]string{manifest.ServiceLabel: service}},
			Spec: appsv1.StatefulSetSpec{Replicas: &spec}, Status: appsv1.StatefulSetStatus{AvailableReplicas: available}}
	}
	services := ObserveReplicaSets([]*appsv1.ReplicaSet{rs("web", "1", "", 2, 2)})
	ObserveStatefulSets(services, []*appsv1.StatefulSet{sts("db", 3, 2), sts("cache", 1, 3), {ObjectMeta: metav1.ObjectMeta{Name: "x"}}})
	assert.Equal(t, map[string]ServiceHealth{
		"web":   {Service: "web", Desired: 2, Available: 2},
		"db":    {Service: "db", Desired: 3, Available: 2},
		"cache": {Service: "cache", Desired: 1, Available: 1},
	}, services)
}

// Issue 40.2: the observer's caches keep what an observation reads and
// drop the pod and claim templates and the managed fields, most of each
// object; what it observes of a trimmed object is what it observed of
// the whole one.
func TestTheCachesKeepWhatAnObservationReads(t *testing.T) {
	whole := func() *appsv1.ReplicaSet {
		r := rs("web", "2", "3", 3, 2)
		r.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "deployflow"}}
		r.Spec.Template = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27",
			Env: []corev1.EnvVar{{Name: "A", Value: strings.Repeat("x", 4096)}}}}}}
		return r
	}
	trimmed, err := trimForObservation(whole())
	require.NoError(t, err)
	r := trimmed.(*appsv1.ReplicaSet)
	assert.Empty(t, r.ManagedFields)
	// Guards a regression of this change: the rollouts' waits read the
	// same cache (ReplicaSetsOf) and find their new ReplicaSet by its
	// template; without it every step of every rollout made another.
	assert.Equal(t, whole().Spec.Template, r.Spec.Template, "a ReplicaSet keeps its pod template")
	assert.Equal(t, ObserveReplicaSets([]*appsv1.ReplicaSet{whole()}), ObserveReplicaSets([]*appsv1.ReplicaSet{r}))

	three := int32(3)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Labels: map[string]string{manifest.ServiceLabel: "db"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "deployflow"}}},
		Spec: appsv1.StatefulSetSpec{Replicas: &three, Template: whole().Spec.Template,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}},
		Status: appsv1.StatefulSetStatus{AvailableReplicas: 2}}
	before := map[string]ServiceHealth{}
	ObserveStatefulSets(before, []*appsv1.StatefulSet{sts.DeepCopy()})
	trimmed, err = trimForObservation(sts)
	require.NoError(t, err)
	s := trimmed.(*appsv1.StatefulSet)
	assert.Empty(t, s.ManagedFields)
	assert.Empty(t, s.Spec.Template.Spec.Containers)
	assert.Empty(t, s.Spec.VolumeClaimTemplates)
	after := map[string]ServiceHealth{}
	ObserveStatefulSets(after, []*appsv1.StatefulSet{s})
	assert.Equal(t, before, after)

	lease := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"owner": "acme"}}}
	lease.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "deployflow"}})
	trimmed, err = trimForObservation(lease)
	require.NoError(t, err)
	assert.Empty(t, trimmed.(*unstructured.Unstructured).GetManagedFields())
	assert.Equal(t, "acme", trimmed.(*unstructured.Unstructured).Object["spec"].(map[string]any)["owner"])
}
