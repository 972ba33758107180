package devstack

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// DEPLOYFLOW_CLUSTERS for `make dev-up` (issue 23.6): names separated by
// spaces or commas, each once, at most MaxClusters.
func TestClustersFrom(t *testing.T) {
	names, err := ClustersFrom("staging eu-1,us-1")
	require.NoError(t, err)
	assert.Equal(t, []string{"staging", "eu-1", "us-1"}, names)
	none, err := ClustersFrom("")
	require.NoError(t, err)
	assert.Empty(t, none)
	_, err = ClustersFrom("eu-1 eu-1")
	assert.ErrorContains(t, err, `cluster "eu-1" named twice`)
	_, err = ClustersFrom("a b c d e f g h i j")
	assert.ErrorContains(t, err, "at most 9")
}
