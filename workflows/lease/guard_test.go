package lease

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/workflows/rollout"
)

// Issue 20.7: what a workflow carries across continue-as-new is its own;
// typed by hand it is refused, and so is a trigger that is not a word.
func TestGuardRefusesWhatOnlyTheWorkflowWrites(t *testing.T) {
	m := oneService("l")
	bad := oneService("l")
	bad.Services[0].Rollout = nil
	bad.Services[0].Image = ""
	for _, tc := range []struct {
		name      string
		in        api.DeployInput
		continued bool
		want      string
	}{
		{"a carry on a fresh start", api.DeployInput{Manifest: m, Carry: rawCarry(&deployCarry{Phase: api.PhaseActive, LastGood: &m})}, false, "carry: is set by the workflow itself"},
		{"a carried manifest that does not validate", api.DeployInput{Manifest: m, Carry: rawCarry(&deployCarry{Phase: api.PhaseActive, LastGood: &bad})}, true, "carry.lastGood: services[0].image"},
		{"a long trigger", api.DeployInput{Manifest: m, Trigger: strings.Repeat("x", 65)}, false, "trigger: 65 bytes"},
		{"a markdown trigger", api.DeployInput{Manifest: m, Trigger: "[x](http://e)"}, false, "trigger: \"[x](http://e)\""},
		{"a carried trigger", api.DeployInput{Manifest: m, Carry: rawCarry(&deployCarry{PendingTrigger: "a\nb"})}, true, "carry.pendingTrigger"},
	} {
		err := deployed(tc.in).guard(tc.continued)
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
	for _, ok := range []api.DeployInput{
		{Manifest: m, Trigger: "cli"},
		{Manifest: m, Trigger: "schedule:nightly-restart"},
		{Manifest: m, Carry: rawCarry(&deployCarry{Phase: api.PhaseActive, LastGood: &m, PendingTrigger: "ui"})},
	} {
		assert.NoError(t, deployed(ok).guard(true))
	}
}

// Review of issue 20: today's stricter rules (the condition language,
// PromQL scoping, 256 KiB) apply to fresh starts; a continued run carries a
// manifest accepted under the rules of its day, and its lease must not
// lose its workflow for it (measurement contains it: not judged, not run).
func TestACarriedManifestIsValidatedByTheRulesOfItsDay(t *testing.T) {
	m := oneService("l")
	m.Services[0].Rollout = &manifest.Rollout{Strategy: manifest.StrategyCanary, Steps: []manifest.CanaryStep{{Analysis: &manifest.Analysis{
		Prometheus: &manifest.PrometheusQuery{Query: `rate(x{namespace="lease-l"}[1m])`}, SuccessCondition: "result in [200, 204]"}}}}
	require.Error(t, m.Validate(), "today's rules refuse it")
	assert.NoError(t, m.ValidateLenient(), "the rules of its day took it")
	assert.NoError(t, deployed(api.DeployInput{Manifest: m, Carry: rawCarry(&deployCarry{Phase: api.PhaseActive, LastGood: &m})}).guard(true))
}

// Issue 35.2: a lease's workflow runs only under its lease's ID. Under
// another (another lease's, a lookalike, any), it acted for the lease in
// its manifest; it is refused, typed, before any activity runs.
func TestALeaseWorkflowRunsOnlyUnderItsLeasesID(t *testing.T) {
	for _, id := range []string{api.DeployWorkflowID("other"), api.DeployWorkflowID("l") + "-2", api.DeployWorkflowID("l") + "@eu", "anything"} {
		env := newDeployEnv(t, func(env *deployEnv) {
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
		})
		env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: oneService("l"), Trigger: "test"})
		require.True(t, env.IsWorkflowCompleted(), id)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, env.GetWorkflowError(), &appErr, id)
		assert.Equal(t, api.ErrInvalidInput, appErr.Type(), id)
		if !strings.Contains(id, "@") { // deploy-l@eu: checkCluster names the cluster first
			assert.Contains(t, appErr.Error(), "workflow ID: lease l's deploys run as workflow deploy-l, not "+id)
		}
		env.AssertNotCalled(t, "PrepareDeploy", mock.Anything, mock.Anything)
		env.AssertNotCalled(t, "ApplyDeploy", mock.Anything, mock.Anything)
	}
	env := newDeployEnv(t, func(env *deployEnv) {
		env.OnWorkflow(rollout.RolloutWorkflow, mock.Anything, mock.Anything).Return(&api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil)
	})
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: oneService("l"), Trigger: "test"})
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can, "under deploy-l it deploys, and continues as new")
	in := continuedWith(t, env.GetWorkflowError())
	assert.Equal(t, api.PhaseActive, deployed(in).Carry.Phase)
}

// Issue 35.2: a duration typed into a lease's input in seconds saturates.
// Multiplied as it was, "healthIntervalSeconds": 18446744074 wrapped round
// to 0.29s: the idle lease read its observation three times a second.
func TestInputSecondsSaturate(t *testing.T) {
	for n, want := range map[int]time.Duration{
		-5: 0, 0: 0, 1: time.Second, 3600: time.Hour,
		604800: 7 * 24 * time.Hour, 604801: 7 * 24 * time.Hour,
		18446744074: 7 * 24 * time.Hour, math.MaxInt: 7 * 24 * time.Hour,
	} {
		assert.Equal(t, want, inputSeconds(n), "%d", n)
	}

	var reads int
	env := idleLease(t, func(env *deployEnv) {
		env.OnActivity(env.a.ObserveLease, mock.Anything, "l").Return(func(context.Context, string) (*observe.Observation, error) {
			reads++
			o := web(2)
			return &o, nil
		}).Maybe()
	})
	env.in.HealthIntervalSeconds = 18446744074
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(DeployWorkflow, env.in.encode())
	require.True(t, env.IsWorkflowCompleted())
	assert.Zero(t, reads, "an idle lease whose safety net is a week reads nothing in a minute")
}

// Issue 35.2: a plan fingerprint typed by hand is one a plan could have,
// or refused without echoing it (TestHandTypedInputsCannotSkipValidation
// sends one to a running lease).
func TestAPlanFingerprintIsOnlyOneAPlanCouldHave(t *testing.T) {
	assert.NoError(t, api.CheckPlanFingerprint("planFingerprint", ""))
	assert.NoError(t, api.CheckPlanFingerprint("planFingerprint", "0123456789abcdef"))
	for _, bad := range []string{"0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "<img src=x>", strings.Repeat("f", 1<<20)} {
		err := api.CheckPlanFingerprint("planFingerprint", bad)
		require.Error(t, err, "%.40s", bad)
		assert.Contains(t, err.Error(), "planFingerprint:")
		assert.NotContains(t, err.Error(), bad, "not echoed")
	}
}
