package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// Found by make chaos (a batch of runs side by side on 2 cores): the CLI's
// update-with-start hands a new lease's workflow its manifest twice, as the
// input and as the deploy update. When the update came in a later workflow
// task than the start, it superseded the deploy of the input: its rollouts
// were cancelled and the same manifest deployed again as deploy #2. A
// request for the manifest being deployed now joins that deploy.
func TestTheSameManifestDuringItsDeployJoinsIt(t *testing.T) {
	env, rollouts := minuteLongRollouts(t)
	var joined DeployStatus
	var updateErr error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateDeploy, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { updateErr = err }, OnAccept: func() {},
			OnComplete: func(v any, err error) {
				updateErr = err
				if st, ok := v.(DeployStatus); ok {
					joined = st
				}
			},
		}, DeployRequest{Manifest: oneService("l"), Trigger: "cli"})
	}, 10*time.Second)
	env.ExecuteWorkflow(DeployWorkflow, DeployInput{Manifest: oneService("l"), Trigger: "cli"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, updateErr)
	assert.Equal(t, int64(0), joined.Revision, "the update's answer: the caller waits for the deploy after revision 0, the one in progress")
	assert.False(t, joined.Pending)

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new after the deploy, got %v", env.GetWorkflowError())
	var next DeployInput
	require.NoError(t, converterDecode(can, &next))
	assert.Equal(t, 1, *rollouts)
	assert.Equal(t, int64(1), next.Carry.Revision, "one deploy")
	assert.Nil(t, next.Carry.Pending, "nothing left to deploy again")
	require.Len(t, next.Carry.History, 1)
	assert.Equal(t, "Succeeded", next.Carry.History[0].Outcome)
	assert.Equal(t, PhaseActive, next.Carry.Phase)
}

// A deploy bound to an approved plan may yet abort (the plan changed): the
// same manifest sent without a plan then waits its turn rather than joining
// a deploy that may never happen.
func TestTheSameManifestDoesNotJoinADeployBoundToAPlan(t *testing.T) {
	env := idleLease(t, func(env *deployEnv) {
		env.OnWorkflow(RolloutWorkflow, mock.Anything, mock.Anything).After(time.Minute).Return(&RolloutResult{Outcome: OutcomeComplete, DesiredReplicas: 1}, nil)
	})
	m := oneService("l")
	m.Services[0].Image = "nginx:1.28"
	var second DeployStatus
	send := func(at time.Duration, req DeployRequest, into *DeployStatus) {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(UpdateDeploy, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("rejected: %v", err) }, OnAccept: func() {},
				OnComplete: func(v any, err error) {
					if st, ok := v.(DeployStatus); ok && into != nil {
						*into = st
					}
				},
			}, req)
		}, at)
	}
	send(time.Second, DeployRequest{Manifest: m, PlanFingerprint: "fp1"}, nil)
	send(10*time.Second, DeployRequest{Manifest: m}, &second)
	env.ExecuteWorkflow(DeployWorkflow, env.in)
	require.True(t, env.IsWorkflowCompleted())
	assert.True(t, second.Pending, "the request joined a deploy bound to a plan")
	next := continuedWith(t, env.GetWorkflowError())
	require.NotNil(t, next.Carry.Pending, "the second request was lost")
}

// Found by make chaos (a placement, the second cluster's API server
// stopped at the end of wave 2): a placement's Update-with-Start started
// the cluster's lease workflow, but its first workflow task failed and the
// update was rejected; the run deployed its input, and the placement's
// retried update, with its key, superseded that deploy: the cluster
// deployed the same manifest twice. The start now carries the key, so the
// input's deploy is the keyed one, and a request repeating the key of the
// deploy in progress, pending or recorded changes nothing (gate
// idempotent-keys).
func TestARequestRepeatingTheKeyOfTheDeployInProgressChangesNothing(t *testing.T) {
	env, rollouts := minuteLongRollouts(t)
	const key = "placement:run-1:1:eu-1:deploy"
	var updateErr error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateDeploy, key, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { updateErr = err }, OnAccept: func() {},
			OnComplete: func(_ any, err error) { updateErr = err },
		}, DeployRequest{Manifest: oneService("l"), Trigger: "placement", Key: key})
	}, 10*time.Second) // the input's deploy is under way
	env.ExecuteWorkflow(DeployWorkflow, DeployInput{Manifest: oneService("l"), Trigger: "placement", Key: key})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, updateErr)

	next := continuedWith(t, env.GetWorkflowError())
	assert.Equal(t, 1, *rollouts, "one rollout")
	assert.Equal(t, int64(1), next.Carry.Revision, "one deploy")
	assert.Nil(t, next.Carry.Pending, "nothing left to deploy again")
	require.Len(t, next.Carry.History, 1)
	assert.Equal(t, key, next.Carry.History[0].Key, "the input's deploy is the keyed one")
	assert.Equal(t, "Succeeded", next.Carry.History[0].Outcome)
	assert.Empty(t, next.Key, "the key is the start's, not the continued run's")
}

// A start's key is checked as a request's is: hand-typed input.
func TestAStartsKeyIsChecked(t *testing.T) {
	env := newDeployEnv(t, func(*deployEnv) {})
	env.ExecuteWorkflow(DeployWorkflow, DeployInput{Manifest: oneService("l"), Key: "bad key\n"})
	require.Error(t, env.GetWorkflowError())
	assert.Contains(t, env.GetWorkflowError().Error(), `key: "bad key\n": use letters, digits`)
}

// minuteLongRollouts is a lease whose rollouts each take a minute and
// complete, counted.
func minuteLongRollouts(t *testing.T) (*deployEnv, *int) {
	rollouts := 0
	env := newDeployEnv(t, func(env *deployEnv) {
		env.OnWorkflow(RolloutWorkflow, mock.Anything, mock.Anything).After(time.Minute).Return(
			func(workflow.Context, RolloutInput) (*RolloutResult, error) {
				rollouts++
				return &RolloutResult{Outcome: OutcomeComplete, DesiredReplicas: 1}, nil
			})
	})
	return env, &rollouts
}
