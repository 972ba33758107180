package crds_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/deployflow/deployflow/k8s/crds"
)

// Issue 10: the worker no longer installs CRDs by default; at start it
// checks that the cluster serves them, and says how to install them.
func TestCheckNamesMissingResourcesAndHowToInstallThem(t *testing.T) {
	disco := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{}}
	err := crds.Check(disco)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "leases.deployflow.dev")
	assert.Contains(t, err.Error(), "kubectl apply --server-side -f deploy/helm/deployflow/crds/")
	assert.Contains(t, err.Error(), "--install-crds")

	disco.Resources = []*metav1.APIResourceList{{GroupVersion: crds.APIVersion, APIResources: []metav1.APIResource{
		{Name: "leases"}, {Name: "hostnamereservations"}}}}
	err = crds.Check(disco)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ipreservations.deployflow.dev")
	assert.NotContains(t, err.Error(), "[leases")

	disco.Resources[0].APIResources = append(disco.Resources[0].APIResources, metav1.APIResource{Name: "ipreservations"})
	assert.NoError(t, crds.Check(disco))
}

// The Helm chart's crds/ are the definitions the binary embeds (and
// --install-crds installs): one source of truth, checked.
func TestHelmChartCarriesTheSameCRDs(t *testing.T) {
	chart, err := filepath.Glob("../../deploy/helm/deployflow/crds/*.yaml")
	require.NoError(t, err)
	embedded, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	require.Len(t, chart, len(embedded))
	for _, f := range embedded {
		want, err := os.ReadFile(f)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("../../deploy/helm/deployflow/crds", f))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "deploy/helm/deployflow/crds/%s differs from k8s/crds/%s: copy it over", f, f)
	}
}
