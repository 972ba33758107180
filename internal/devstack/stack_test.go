package devstack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
