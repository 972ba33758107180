package rollout

import (
	"errors"
	"testing"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/wftest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// Issue 8.2: RolloutWorkflow created any namespace it was given (kube-system
// included) and wrote ReplicaSets there with the worker's credentials. A
// namespace the worker may not act in now ends it, typed, before any write.
func TestRolloutWorkflowStopsAtANamespaceItMayNotActIn(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := wftest.NewEnv(&s)
	a := &activities.Activities{}
	env.RegisterActivity(a)
	env.OnActivity(a.PrepareRollout, mock.Anything, mock.Anything).Return(
		nil, temporal.NewNonRetryableApplicationError("namespace kube-system: is not managed by deployflow", activities.ErrNamespaceNotAllowed, nil))
	in := validInput()
	in.Namespace = "kube-system"
	env.ExecuteWorkflow(RolloutWorkflow, in)
	require.True(t, env.IsWorkflowCompleted())
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(env.GetWorkflowError(), &appErr), "got %v", env.GetWorkflowError())
	assert.Equal(t, activities.ErrNamespaceNotAllowed, appErr.Type())
	env.AssertNotCalled(t, "ApplyPlan", mock.Anything, mock.Anything)
}
