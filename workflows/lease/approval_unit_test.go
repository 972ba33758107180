package lease

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
)

// Guards an approved plan's second reading: it is recorded (a 1 ms timer
// ends the workflow task) before the deploy's first write. Before, the
// plan read again on approval and the apply ran in one task; a task that
// failed after the apply was taken again, read the cluster with the
// apply's writes in it and found the approved plan stale: the deploy was
// aborted "nothing was changed" with its objects written
// (TestApprovedPlanDeploysAndAStalePlanIsRefused, CI run 43).
func TestAnApprovedPlansSecondReadingIsRecordedBeforeTheFirstWrite(t *testing.T) {
	var seq []string
	approved := false
	env := newDeployEnv(t, func(env *deployEnv) {
		env.rollouts(api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil)
		env.OnActivity(env.a.PlanDeploy, mock.Anything, mock.Anything).Return(
			func(context.Context, activities.PlanInput) (*activities.DeployPlan, error) {
				seq = append(seq, "plan again")
				return &activities.DeployPlan{Fingerprint: "0123456789abcdef"}, nil
			})
		env.OnActivity(env.a.ApplyDeploy, mock.Anything, mock.Anything).Return(
			func(context.Context, activities.ApplyDeployInput) (*activities.ApplyDeployResult, error) {
				seq = append(seq, "apply")
				return &activities.ApplyDeployResult{IPs: map[string]string{}, Hostnames: &activities.HostnamesResult{},
					Applied: &activities.ApplyObjectsResult{}, Classes: []activities.Classification{{Service: "web", Class: activities.ChangeRollout}}}, nil
			})
	})
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		if approved {
			seq = append(seq, fmt.Sprintf("timer %s", d))
		}
	})
	env.RegisterDelayedCallback(func() {
		approved = true
		env.UpdateWorkflow(api.UpdateApprove, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("approval refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, api.ApproveRequest{})
	}, time.Minute)
	m := oneService("l")
	m.RequireApproval = true
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: m, Trigger: "test"})
	require.True(t, env.IsWorkflowCompleted())
	in := continuedWith(t, env.GetWorkflowError())
	assert.Equal(t, api.PhaseActive, deployed(in).Carry.Phase, deployed(in).Carry.LastError)
	require.GreaterOrEqual(t, len(seq), 3, "%v", seq)
	assert.Equal(t, []string{"plan again", "timer 1ms", "apply"}, seq[:3], "the second reading is recorded before the apply")
}
