package devstack

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// Runs side by side that share an extra cluster start it at once, and each
// writes its kubeconfig. With one temporary name for every writer, one's
// rename took the other's file and the other failed ("rename
// kubeconfig.new kubeconfig: no such file or directory": the chaos sweep's
// placement runs, seven side by side). Every writer succeeds now, and the
// file holds one writer's content whole.
func TestWritersSideBySideEachReplaceTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- replaceFile(path, []byte(strings.Repeat(strconv.Itoa(i%10), 4096)))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, b, 4096)
	assert.Equal(t, strings.Repeat(string(b[0]), 4096), string(b), "one writer's content, whole")
	left, err := filepath.Glob(path + ".*")
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file is left behind")
}
