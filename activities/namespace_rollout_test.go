package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
)

// Issue 22 (apiserver requests per deploy): a lease's own rollout finds
// the namespace its deploy's chain just ensured (profile, ServiceAccount)
// and reads it once, writing nothing; the chain's EnsureNamespace, a
// standalone rollout, and a lease rollout whose namespace is gone still do
// the whole job. Before, every rollout re-applied the ResourceQuota and
// LimitRange when asked as the lease's, and listed the ServiceAccount.
func TestALeasesRolloutReadsItsNamespaceOnce(t *testing.T) {
	labels := map[string]string{manifest.ManagedByLabel: manifest.ManagedBy, manifest.LeaseLabel: "a", PodSecurityEnforceLabel: "restricted"}
	existing := func() *fake.Clientset {
		return fake.NewClientset(
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: manifest.Namespace("a"), Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{Kind: crds.KindLease, Name: "a", APIVersion: crds.APIVersion}}}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: manifest.Namespace("a")}})
	}
	in := EnsureNamespaceInput{Name: manifest.Namespace("a"), Labels: map[string]string{manifest.LeaseLabel: "a"}}

	kc := existing()
	// As the rollout workflow asks (rollout/calls.go): deployflow's label,
	// and the parent lease Temporal names.
	rollout := EnsureNamespaceInput{Name: manifest.Namespace("a"), Labels: map[string]string{manifest.ManagedByLabel: manifest.ManagedBy},
		Rollout: true, ParentLease: "a"}
	require.NoError(t, (&Activities{Kube: kc}).EnsureNamespace(context.Background(), rollout))
	require.Len(t, kc.Actions(), 1, "the lease's rollout: %v", kc.Actions())
	assert.Equal(t, "get", kc.Actions()[0].GetVerb())

	kc = existing()
	require.NoError(t, (&Activities{Kube: kc}).EnsureNamespace(context.Background(), in))
	var resources []string
	for _, act := range kc.Actions() {
		resources = append(resources, act.GetVerb()+" "+act.GetResource().Resource)
	}
	assert.Contains(t, resources, "patch resourcequotas", "the chain re-applies the lease's profile")
	assert.Contains(t, resources, "patch limitranges")
	assert.Contains(t, resources, "list serviceaccounts")

	kc = existing()
	other := rollout
	other.ParentLease = "b"
	err := (&Activities{Kube: kc}).EnsureNamespace(context.Background(), other)
	require.Error(t, err, "another lease's rollout is still refused")
}
