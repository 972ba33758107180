package wftest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// Guards the unit tests from a starved CPU (local CI run 98: "Potential
// deadlock detected: workflow goroutine root didn't yield for over 1s"):
// a workflow that holds its goroutine for longer than the SDK's 1 s, as one
// that gets no CPU does, still runs to its end.
func TestAWorkflowHeldPastTheSDKsDeadlockCheckStillEnds(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := NewEnv(&s)
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		time.Sleep(1500 * time.Millisecond) // not yielding, as a starved goroutine
		return nil
	})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
}
