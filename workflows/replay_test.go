package workflows_test

import (
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

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
// upgrade: it needs a workflow.GetVersion gate (workflows/gates.go, legacy.go) and
// new recordings beside the old ones, never a rewrite of old ones. No stack
// is needed.
func TestRecordedHistoriesReplay(t *testing.T) {
	t.Parallel() // CPU-bound, needing nothing of the package's other tests
	var files []string
	require.NoError(t, filepath.WalkDir(historiesDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			files = append(files, p)
		}
		return err
	}))
	require.NotEmpty(t, files, "no recorded histories in %s: run make record-histories", historiesDir)
	types := map[string]int{}
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, f := range files {
		rel, _ := filepath.Rel(historiesDir, f)
		typ, _, _ := strings.Cut(filepath.Base(f), "-")
		types[typ]++
		t.Run(rel, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflows.DeployWorkflow)
			r.RegisterWorkflow(workflows.RolloutWorkflow)
			r.RegisterWorkflow(workflows.ScheduledDeployWorkflow)
			r.RegisterWorkflow(workflows.PlanWorkflow)
			r.RegisterWorkflow(workflows.PlacementWorkflow)
			require.NoError(t, recordings.Replay(r, logger, f))
		})
	}
	for _, typ := range []string{"DeployWorkflow", "RolloutWorkflow", "ScheduledDeployWorkflow", "PlanWorkflow", "PlacementWorkflow"} {
		require.NotZero(t, types[typ], "no recorded history of %s", typ)
	}
}
