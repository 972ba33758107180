package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/worker/testenv"
)

// A lease whose workflow's task keeps failing cannot answer a status:
// Temporal refuses the query with "Workflow Task in failed state" and no
// more. The CLI says what the workflow's history recorded of the failure.
// Guards the status that only said Temporal's words (CI stop 48: a lease
// of TestOperatorCommands whose task failed for a minute, with nothing
// to say why).
func TestTheStatusOfALeaseWhoseTaskKeepsFailingSaysWhy(t *testing.T) {
	env := testenv.Get(t)
	tq := testenv.Name(t, "tq")
	lease := testenv.ShortName("stuck")
	// A worker whose DeployWorkflow cannot run: every task panics, as a
	// worker with a defect would.
	w := worker.New(env.Temporal, tq, worker.Options{WorkerStopTimeout: time.Second})
	w.RegisterWorkflowWithOptions(func(workflow.Context) error {
		panic("a test's workflow that cannot run")
	}, workflow.RegisterOptions{Name: "DeployWorkflow"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	ctx := context.Background()
	_, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: api.DeployWorkflowID(lease), TaskQueue: tq}, "DeployWorkflow")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Temporal.TerminateWorkflow(context.Background(), api.DeployWorkflowID(lease), "", "test over")
	})

	var stderr string
	testenv.Eventually(t, time.Minute, 500*time.Millisecond, "the status never said why the task fails", func() (bool, string) {
		var code int
		code, _, stderr = runCLI("status", lease, "--temporal-address", devstack.TemporalAddress, "--task-queue", tq, "--temporal-retry", "1s")
		// On a loaded machine the first task can time out before the
		// worker takes it (CI run 73): the status then says that, and the
		// panic once a task has failed with it.
		return code != 0 && strings.Contains(stderr, "its workflow's task keeps failing") &&
			strings.Contains(stderr, "a test's workflow that cannot run"), stderr
	})
	assert.Contains(t, stderr, "Workflow Task in failed state")
	assert.Contains(t, stderr, "WorkflowWorkerUnhandledFailure: a test's workflow that cannot run")
	assert.Contains(t, stderr, "temporal workflow show -w "+api.DeployWorkflowID(lease))
	assert.NotContains(t, stderr, "is it deployed?", "the lease's workflow runs: the hint for a lease never deployed would mislead")
}
