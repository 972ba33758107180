package devstack

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// DEPLOYFLOW_CLUSTERS for `make dev-up` (issue 23.6): names separated by
// spaces or commas, each once, at most 4 (tests take the higher numbers).
func TestClustersFrom(t *testing.T) {
	names, err := ClustersFrom("staging eu-1,us-1")
	require.NoError(t, err)
	assert.Equal(t, []string{"staging", "eu-1", "us-1"}, names)
	none, err := ClustersFrom("")
	require.NoError(t, err)
	assert.Empty(t, none)
	_, err = ClustersFrom("eu-1 eu-1")
	assert.ErrorContains(t, err, `cluster "eu-1" named twice`)
	_, err = ClustersFrom("a b c d")
	require.NoError(t, err)
	_, err = ClustersFrom("a b c d e")
	assert.ErrorContains(t, err, "at most 4")
}
