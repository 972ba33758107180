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

// make bench-scale's fleet is created over several sessions: its stack
// goes down keeping the cluster's and Temporal's data, for the next up.
func TestDownKeepingDataLeavesTheClustersAndTemporalsData(t *testing.T) {
	cache := t.TempDir()
	s := &Stack{CacheDir: cache, RunDir: filepath.Join(cache, "run"), Logf: t.Logf}
	for _, f := range []string{"etcd/member", "pki/ca.crt", "temporal.db", "kubeconfig"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(s.RunDir, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(s.RunDir, f), []byte("x"), 0o644))
	}
	require.NoError(t, s.DownKeepingData())
	for _, f := range []string{"etcd/member", "pki/ca.crt", "temporal.db", "kubeconfig"} {
		assert.FileExists(t, filepath.Join(s.RunDir, f))
	}
	require.NoError(t, s.Down())
	assert.NoDirExists(t, filepath.Join(s.RunDir, "etcd"))
	assert.NoFileExists(t, filepath.Join(s.RunDir, "temporal.db"))
}

// DEPLOYFLOW_RUN_DIR puts a stack's data apart from the cache's run/ (which
// make dev-down, the tests and CI start clean); the binaries stay in the
// cache.
func TestTheRunDirectoryCanLiveApartFromTheCache(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	repo, err := FindRepo(wd)
	require.NoError(t, err)
	cache, run := t.TempDir(), t.TempDir()
	t.Setenv("DEPLOYFLOW_CACHE", cache)
	s, err := New(repo, nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cache, "run"), s.RunDir, "by default")
	t.Setenv(RunDirEnv, run)
	s, err = New(repo, nil)
	require.NoError(t, err)
	assert.Equal(t, run, s.RunDir)
	assert.Equal(t, cache, s.CacheDir)
	assert.Equal(t, filepath.Join(run, "kubeconfig"), s.Kubeconfig())
	t.Setenv(RunDirEnv, "relative/run")
	_, err = New(repo, nil)
	assert.ErrorContains(t, err, "DEPLOYFLOW_RUN_DIR")
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
