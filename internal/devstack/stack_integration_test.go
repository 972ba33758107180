package devstack_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/worker/testenv"
)

// A second `dev-up` reuses the running stack: nothing is started, every
// recorded PID stays the same and every component is ready.
func TestUpReusesARunningStack(t *testing.T) {
	env := testenv.Get(t)
	before := env.Stack.Status(context.Background())

	started, err := env.Stack.Up(context.Background())
	require.NoError(t, err)
	assert.False(t, started, "Up on a running stack must start nothing")

	after := env.Stack.Status(context.Background())
	require.Len(t, after, len(env.Stack.Processes()))
	for i, c := range after {
		assert.True(t, c.Running, "%s running", c.Name)
		assert.NoError(t, c.Ready, "%s ready", c.Name)
		assert.Equal(t, before[i].PID, c.PID, "%s kept its PID", c.Name)
	}
}

// Guards the dev server's write-ahead log (journal_mode=wal): with SQLite's
// default rollback journal, 500 deploys started at once timed out 85 to 177
// of their workflow starts at the SDK's 10s deadline on the 2-core machine
// (make bench's errors column; with the log, none). Either mode's Temporal
// writes ahead to a log: the dev server's SQLite in WAL mode (the log is
// there while it runs, and only in that mode), or PostgreSQL, which always
// does (it runs, and the Temporal server on it is ready).
func TestTemporalsStoreWritesAheadToALog(t *testing.T) {
	env := testenv.Get(t)
	if env.Stack.TemporalMode == devstack.ModePostgres {
		for _, c := range env.Stack.Status(context.Background()) {
			if c.Name == devstack.Postgres || c.Name == devstack.Temporal {
				assert.True(t, c.Running, "%s running", c.Name)
				assert.NoError(t, c.Ready, "%s ready", c.Name)
			}
		}
		return
	}
	_, err := os.Stat(filepath.Join(env.Stack.RunDir, "temporal.db-wal"))
	assert.NoError(t, err, "the dev server's SQLite write-ahead log")
}
