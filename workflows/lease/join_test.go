package lease

import (
	"errors"
	"testing"
	"time"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/workflows/rollout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
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
	var joined api.DeployStatus
	var updateErr error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdateDeploy, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { updateErr = err }, OnAccept: func() {},
			OnComplete: func(v any, err error) {
				updateErr = err
				if st, ok := v.(api.DeployStatus); ok {
					joined = st
				}
			},
		}, api.DeployRequest{Manifest: oneService("l"), Trigger: "cli"})
	}, 10*time.Second)
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: oneService("l"), Trigger: "cli"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, updateErr)
	assert.Equal(t, int64(0), joined.Revision, "the update's answer: the caller waits for the deploy after revision 0, the one in progress")
	assert.False(t, joined.Pending)

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new after the deploy, got %v", env.GetWorkflowError())
	var next api.DeployInput
	require.NoError(t, converterDecode(can, &next))
	assert.Equal(t, 1, *rollouts)
	assert.Equal(t, int64(1), deployed(next).Carry.Revision, "one deploy")
	assert.Nil(t, deployed(next).Carry.Pending, "nothing left to deploy again")
	require.Len(t, deployed(next).Carry.History, 1)
	assert.Equal(t, "Succeeded", deployed(next).Carry.History[0].Outcome)
	assert.Equal(t, api.PhaseActive, deployed(next).Carry.Phase)
}

// A deploy bound to an approved plan may yet abort (the plan changed): the
// same manifest sent without a plan then waits its turn rather than joining
// a deploy that may never happen.
func TestTheSameManifestDoesNotJoinADeployBoundToAPlan(t *testing.T) {
	env := idleLease(t, func(env *deployEnv) {
		env.OnWorkflow(rollout.RolloutWorkflow, mock.Anything, mock.Anything).After(time.Minute).Return(&api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil)
	})
	m := oneService("l")
	m.Services[0].Image = "nginx:1.28"
	var second api.DeployStatus
	send := func(at time.Duration, req api.DeployRequest, into *api.DeployStatus) {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(api.UpdateDeploy, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("rejected: %v", err) }, OnAccept: func() {},
				OnComplete: func(v any, err error) {
					if st, ok := v.(api.DeployStatus); ok && into != nil {
						*into = st
					}
				},
			}, req)
		}, at)
	}
	send(time.Second, api.DeployRequest{Manifest: m, PlanFingerprint: "0123456789abcdef"}, nil)
	send(10*time.Second, api.DeployRequest{Manifest: m}, &second)
	env.ExecuteWorkflow(DeployWorkflow, env.in.encode())
	require.True(t, env.IsWorkflowCompleted())
	assert.True(t, second.Pending, "the request joined a deploy bound to a plan")
	next := continuedWith(t, env.GetWorkflowError())
	require.NotNil(t, deployed(next).Carry.Pending, "the second request was lost")
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
		env.UpdateWorkflow(api.UpdateDeploy, key, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { updateErr = err }, OnAccept: func() {},
			OnComplete: func(_ any, err error) { updateErr = err },
		}, api.DeployRequest{Manifest: oneService("l"), Trigger: "placement", Key: key})
	}, 10*time.Second) // the input's deploy is under way
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: oneService("l"), Trigger: "placement", Key: key})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, updateErr)

	next := continuedWith(t, env.GetWorkflowError())
	assert.Equal(t, 1, *rollouts, "one rollout")
	assert.Equal(t, int64(1), deployed(next).Carry.Revision, "one deploy")
	assert.Nil(t, deployed(next).Carry.Pending, "nothing left to deploy again")
	require.Len(t, deployed(next).Carry.History, 1)
	assert.Equal(t, key, deployed(next).Carry.History[0].Key, "the input's deploy is the keyed one")
	assert.Equal(t, "Succeeded", deployed(next).Carry.History[0].Outcome)
	assert.Empty(t, next.Key, "the key is the start's, not the continued run's")
}

// A start's key is checked as a request's is: hand-typed input.
func TestAStartsKeyIsChecked(t *testing.T) {
	env := newDeployEnv(t, func(*deployEnv) {})
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: oneService("l"), Key: "bad key\n"})
	require.Error(t, env.GetWorkflowError())
	assert.Contains(t, env.GetWorkflowError().Error(), `key: "bad key\n": use letters, digits`)
}

// minuteLongRollouts is a lease whose rollouts each take a minute and
// complete, counted.
func minuteLongRollouts(t *testing.T) (*deployEnv, *int) {
	rollouts := 0
	env := newDeployEnv(t, func(env *deployEnv) {
		env.OnWorkflow(rollout.RolloutWorkflow, mock.Anything, mock.Anything).After(time.Minute).Return(
			func(workflow.Context, api.RolloutInput) (*api.RolloutResult, error) {
				rollouts++
				return &api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil
			})
	})
	return env, &rollouts
}

// Found in review: a placement's return to the last-known-good manifest was
// guarded only by the placement's own check of the lease's status, then
// sent: a deploy landing in between was replaced by the return, its sender
// told it was accepted. The return now carries IfLast, checked by the lease
// workflow as the request lands: with another deploy in progress it is
// refused (ErrNotLastDeploy) and nothing changes; with the placement's
// deploy still the last, it goes.
func TestAReturnGuardedByItsKeyNeverReplacesANewerDeploy(t *testing.T) {
	const key = "placement:run-1:1:eu-1:deploy"
	good := oneService("l")
	good.Services[0].Image = "nginx:1.26"
	newer := oneService("l")
	newer.Services[0].Image = "nginx:1.29"
	for _, tc := range []struct {
		name     string
		cli      bool // a CLI deploy lands just before the return
		rejected bool
	}{
		{"the placement's deploy is the last: the return goes", false, false},
		{"another deploy landed first: the return is refused", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := idleLease(t, func(env *deployEnv) {
				env.OnWorkflow(rollout.RolloutWorkflow, mock.Anything, mock.Anything).After(time.Minute).Return(&api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 2}, nil)
			})
			env.in.Carry.History = []api.DeployRecord{{Revision: 1, Key: key, Outcome: "Succeeded"}}
			var rejection error
			env.RegisterDelayedCallback(func() {
				if tc.cli {
					env.UpdateWorkflow(api.UpdateDeploy, "cli", &testsuite.TestUpdateCallback{
						OnReject: func(err error) { t.Errorf("the CLI's deploy was refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
					}, api.DeployRequest{Manifest: newer, Trigger: "cli"})
				}
				env.UpdateWorkflow(api.UpdateDeploy, "return", &testsuite.TestUpdateCallback{
					OnReject: func(err error) { rejection = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
				}, api.DeployRequest{Manifest: good, Trigger: "placement", Key: "placement:run-1:1:eu-1:revert", IfLast: key})
			}, time.Second)
			env.ExecuteWorkflow(DeployWorkflow, env.in.encode())
			next := continuedWith(t, env.GetWorkflowError())
			last := deployed(next).Carry.History[len(deployed(next).Carry.History)-1]
			if tc.rejected {
				var appErr *temporal.ApplicationError
				require.ErrorAs(t, rejection, &appErr)
				assert.Equal(t, api.ErrNotLastDeploy, appErr.Type())
				assert.Equal(t, "nginx:1.29", last.Image["web"], "the CLI's deploy ran, not the return")
				assert.Equal(t, "cli", last.Trigger)
			} else {
				require.NoError(t, rejection)
				assert.Equal(t, "nginx:1.26", last.Image["web"], "returned to the last-known-good manifest")
			}
		})
	}
}

// A placement's return sends a cluster's lease back to its last-known-good
// manifest, accepted under the rules of its day. Before, the deploy update
// decoded it by today's rules and its validator refused it (the rules had
// tightened since: here a condition language issue 20 narrowed), so a
// failed placement could not return that cluster. It is taken now as the
// return it is; the same manifest sent by anyone else, or sent as a return
// that is not to the last-known-good one, is still refused.
func TestAPlacementsReturnToALastGoodManifestOfOlderRulesIsTaken(t *testing.T) {
	const key = "placement:run-1:1:eu-1:deploy"
	older := oneService("l") // accepted before issue 20: today's rules refuse its condition
	older.Services[0].Rollout = &manifest.Rollout{Strategy: manifest.StrategyCanary, Steps: []manifest.CanaryStep{{Analysis: &manifest.Analysis{
		Prometheus: &manifest.PrometheusQuery{Query: `rate(x{namespace="lease-l"}[1m])`}, SuccessCondition: "result in [200, 204]"}}}}
	require.Error(t, older.Validate(), "today's rules refuse it")
	require.NoError(t, older.ValidateLenient(), "the rules of its day took it")
	lastGood := withDefaults(&older)
	other := *lastGood
	other.Services = []manifest.Service{other.Services[0]}
	other.Services[0].Image = "nginx:1.25"

	for _, tc := range []struct {
		name   string
		req    api.DeployRequest
		refuse string // the refusal, "" if taken
	}{
		{"the placement's return to it", api.DeployRequest{Manifest: *lastGood, Trigger: "placement", Key: "placement:run-1:1:eu-1:revert", IfLast: key}, ""},
		{"the same manifest from the CLI", api.DeployRequest{Manifest: *lastGood, Trigger: "cli"}, "successCondition"},
		{"a return to another manifest", api.DeployRequest{Manifest: other, Trigger: "placement", Key: "placement:run-1:1:eu-1:revert", IfLast: key}, "successCondition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := idleLease(t, func(env *deployEnv) {
				env.OnWorkflow(rollout.RolloutWorkflow, mock.Anything, mock.Anything).Return(&api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil).Maybe()
			})
			env.in.Carry.LastGood = lastGood
			env.in.Carry.History = []api.DeployRecord{{Revision: 1, Key: key, Outcome: "Succeeded"}}
			var rejection error
			accepted := false
			env.RegisterDelayedCallback(func() {
				env.UpdateWorkflow(api.UpdateDeploy, "return", &testsuite.TestUpdateCallback{
					OnReject: func(err error) { rejection = err }, OnAccept: func() { accepted = true }, OnComplete: func(any, error) {},
				}, tc.req)
			}, time.Second)
			env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Hour)
			env.ExecuteWorkflow(DeployWorkflow, env.in.encode())
			if tc.refuse != "" {
				require.Error(t, rejection, "refused by today's rules")
				assert.Contains(t, rejection.Error(), tc.refuse)
				assert.False(t, accepted)
				return
			}
			require.NoError(t, rejection, "a return to the last-known-good manifest is taken")
			assert.True(t, accepted)
		})
	}
}
