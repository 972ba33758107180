package workflows_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/deployflow/deployflow/internal/recordings"
	"github.com/deployflow/deployflow/workflows"
)

// historiesDir holds histories recorded on the local stack by
// `make record-histories`, one directory per recording, one per scenario
// (the integration test that ran it) below that.
const historiesDir = "../testdata/histories"

// Every recorded history replays on the current workflow code. A change
// that makes one fail would break every running lease at the next worker
// upgrade: it needs a workflow.GetVersion gate (workflows/internal/flow/gates.go, legacy.go) and
// new recordings beside the old ones, never a rewrite of old ones. No stack
// is needed.
func TestRecordedHistoriesReplay(t *testing.T) {
	t.Parallel() // CPU-bound, needing nothing of the package's other tests
	files, err := recordings.Files(historiesDir)
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in %s: run make record-histories", historiesDir)
	types := map[string]int{}
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, f := range files {
		rel, _ := filepath.Rel(historiesDir, f)
		typ, _, _ := strings.Cut(filepath.Base(f), "-")
		types[typ]++
		t.Run(rel, func(t *testing.T) {
			// What a replay checks is determinism, not time: the SDK's 1 s
			// deadlock check fails a replay whose goroutine got no CPU for a
			// second, as make test's below the stack's priority can (the
			// gate table's replays: local CI run 99).
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DisableDeadlockDetection: true})
			require.NoError(t, err)
			workflows.Register(r)
			require.NoError(t, recordings.Replay(r, logger, f))
		})
	}
	for _, typ := range []string{"DeployWorkflow", "RolloutWorkflow", "ScheduledDeployWorkflow", "PlanWorkflow", "PlacementWorkflow"} {
		require.NotZero(t, types[typ], "no recorded history of %s", typ)
	}
}

// The recordings' size budget (issue 36.4): in four days they had grown to
// 66 MB in git, about 8 MB a release, each release recording every
// scenario again. Recordings are gzipped, and a set keeps the scenarios
// its change is about (a full set is about 1.8 MB): over either bound, trim
// the new set, or retire a gate and the recordings only it needs
// (docs/upgrading.md).
func TestRecordingsStayWithinTheirBudget(t *testing.T) {
	const total, perSet = 12 << 20, 2 << 20
	files, err := recordings.Files(historiesDir)
	require.NoError(t, err)
	sets := map[string]int64{}
	var all int64
	for _, f := range files {
		rel, _ := filepath.Rel(historiesDir, f)
		assert.True(t, strings.HasSuffix(f, recordings.Ext), "%s: a recording is gzipped (%s)", rel, recordings.Ext)
		fi, err := os.Stat(f)
		require.NoError(t, err)
		set, _, _ := strings.Cut(rel, string(filepath.Separator))
		sets[set] += fi.Size()
		all += fi.Size()
	}
	for set, n := range sets {
		assert.LessOrEqual(t, n, int64(perSet), "recordings %s: %d bytes; keep a set to the scenarios its change is about", set, n)
	}
	assert.LessOrEqual(t, all, int64(total), "the recordings take %d bytes: retire a gate and the recordings only it needs", all)
	t.Logf("recordings: %d files, %.1f MiB in %d sets", len(files), float64(all)/(1<<20), len(sets))
}
