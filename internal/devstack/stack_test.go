package devstack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

// Guards the dev server's write-ahead log: Down drops Temporal's data, and
// a temporal.db-wal left behind would be replayed into the next stack's new
// database (a fresh stack starting with the old one's workflows). Logs are
// kept.
func TestDownRemovesTheDevServersDatabaseWithItsWriteAheadLog(t *testing.T) {
	cache := t.TempDir()
	s := &Stack{CacheDir: cache, RunDir: filepath.Join(cache, "run"), Logf: t.Logf}
	require.NoError(t, os.MkdirAll(filepath.Join(s.RunDir, "logs"), 0o755))
	for _, f := range []string{"temporal.db", "temporal.db-wal", "temporal.db-shm", "logs/temporal.log"} {
		require.NoError(t, os.WriteFile(filepath.Join(s.RunDir, f), []byte("x"), 0o644))
	}
	require.NoError(t, s.Down())
	for _, f := range []string{"temporal.db", "temporal.db-wal", "temporal.db-shm"} {
		assert.NoFileExists(t, filepath.Join(s.RunDir, f))
	}
	assert.FileExists(t, filepath.Join(s.RunDir, "logs", "temporal.log"), "logs are kept")
}

// Found when test binaries started side by side: one's Up rewrote the
// stack's kubeconfig without the extra clusters' contexts, then with
// them, and another's test read it in between (`does not contain
// "devstack-test-5"`). The kubeconfig is written whole, with every extra
// cluster's context, in one rename: a reader never sees it without them.
func TestTheStacksKubeconfigAlwaysNamesTheExtraClusters(t *testing.T) {
	s := &Stack{RunDir: t.TempDir()}
	require.NoError(t, os.MkdirAll(s.clusterDir("eu-1"), 0o755))
	require.NoError(t, replaceFile(s.ClusterKubeconfig("eu-1"), s.kubeconfigFor("eu-1", "https://127.0.0.1:16444")))
	require.NoError(t, s.writeKubeconfig())

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			if err := s.writeKubeconfig(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for reads := 0; ; reads++ {
		select {
		case <-done:
			require.Positive(t, reads)
			return
		default:
		}
		cfg, err := clientcmd.LoadFromFile(s.Kubeconfig())
		require.NoError(t, err, "read %d", reads)
		require.Contains(t, cfg.Contexts, "eu-1", "read %d: the extra cluster's context", reads)
		assert.Equal(t, "deployflow-dev", cfg.CurrentContext)
	}
}
