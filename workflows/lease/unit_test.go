package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	corev1 "k8s.io/api/core/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/wftest"
	"github.com/deployflow/deployflow/workflows/internal/flow"
	"github.com/deployflow/deployflow/workflows/rollout"
)

// Unit tests of DeployWorkflow's decisions on the SDK's test environment,
// with every activity and the rollout child mocked: fast, no stack. The
// integration tests show the same on the real stack.

type deployEnv struct {
	*testsuite.TestWorkflowEnvironment
	a *activities.Activities
	// released records what ReleaseHostnames / ReleaseIPs were asked to keep.
	released map[string][][]string
	in       deployInput // the input a test starts the workflow with (its carry decoded)
}

func oneService(lease string) manifest.Manifest {
	return manifest.Manifest{Lease: lease, Services: []manifest.Service{{
		Name: "web", Image: "nginx:1.27",
		Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{"web.example.com"}}}}},
	}}}
}

// newDeployEnv mocks a healthy cluster: an active lease, a plan, IPs,
// hostnames, an apply that changes nothing. setup's mocks come first, so
// they win over these defaults.
func newDeployEnv(t *testing.T, setup func(*deployEnv)) *deployEnv {
	var s testsuite.WorkflowTestSuite
	env := &deployEnv{TestWorkflowEnvironment: wftest.NewEnv(&s), released: map[string][][]string{}}
	a := &activities.Activities{}
	env.a = a
	env.RegisterActivity(a)
	env.RegisterWorkflow(rollout.RolloutWorkflow)
	// A lease's workflow runs under its lease's ID (the tests' lease is "l").
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: api.DeployWorkflowID("l")})
	setup(env)
	env.OnActivity(a.PrepareDeploy, mock.Anything, mock.Anything).Return(&activities.PrepareDeployResult{
		Lease: activities.LeaseInfo{ID: "l", Owner: "acme", State: "Active"}, Plan: activities.DeployPlan{Fingerprint: "0123456789abcdef"}}, nil).Maybe()
	env.OnActivity(a.ApplyDeploy, mock.Anything, mock.Anything).Return(&activities.ApplyDeployResult{
		IPs:       map[string]string{},
		Hostnames: &activities.HostnamesResult{Reserved: []string{"web.example.com"}},
		Applied:   &activities.ApplyObjectsResult{},
		Classes:   []activities.Classification{{Service: "web", Class: activities.ChangeRollout}},
	}, nil).Maybe()
	env.OnActivity(a.FinishDeploy, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishDeployInput) (*activities.FinishDeployResult, error) {
			env.released["hostnames"] = append(env.released["hostnames"], in.KeepHostnames)
			env.released["ips"] = append(env.released["ips"], in.KeepIPs)
			return &activities.FinishDeployResult{}, nil
		}).Maybe()
	env.OnActivity(a.ReleaseHostnames, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ReleaseInput) ([]string, error) {
			env.released["hostnames"] = append(env.released["hostnames"], in.Keep)
			env.released["only hostnames"] = append(env.released["only hostnames"], in.Only)
			return in.Only, nil
		}).Maybe()
	env.OnActivity(a.ReleaseIPs, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ReleaseInput) ([]string, error) {
			env.released["ips"] = append(env.released["ips"], in.Keep)
			env.released["only ips"] = append(env.released["only ips"], in.Only)
			return in.Only, nil
		}).Maybe()
	env.OnActivity(a.ReportPhase, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.OnActivity(a.ReportDeploy, mock.Anything, mock.Anything).Return(nil).Maybe()
	return env
}

func (env *deployEnv) rollouts(res api.RolloutResult, err error) {
	env.OnWorkflow(rollout.RolloutWorkflow, mock.Anything, mock.Anything).Return(&res, err).Maybe()
}

// continuedWith is the carry of the run the workflow continued as.
func continuedWith(t *testing.T, err error) api.DeployInput {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	var in api.DeployInput
	require.NoError(t, converterDecode(can, &in))
	require.NotNil(t, in.Carry)
	return in
}

func TestDeployWorkflowDecisions(t *testing.T) {
	leaseGone := temporal.NewNonRetryableApplicationError("lease l does not exist", api.ErrLeaseNotActive, nil)
	conflict := temporal.NewNonRetryableApplicationError("web.example.com is held by lease other", api.ErrHostnameConflict, nil)

	cases := []struct {
		name  string
		setup func(env *deployEnv)
		check func(t *testing.T, env *deployEnv, err error)
	}{{
		// Issue 8.10: deploy-<lease> of an unknown lease recorded Failed and
		// then stayed Running, waking every 30 s, forever.
		name: "an unknown lease ends the workflow with LeaseNotActive",
		setup: func(env *deployEnv) {
			env.OnActivity(env.a.PrepareDeploy, mock.Anything, mock.Anything).Return(nil, leaseGone)
		},
		check: func(t *testing.T, env *deployEnv, err error) {
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "want the workflow to end failed, got %v", err)
			assert.Equal(t, api.ErrLeaseNotActive, appErr.Type())
		},
	}, {
		// Issue 8.5: a deploy that failed after reserving hostnames and IPs
		// but before changing the workload kept them. Issue 35.2: it gives
		// back only what its plan took, never a hostname the lease held
		// before it (its workload may serve it: a lease workflow started
		// afresh, with no last-known-good manifest, released every one).
		name: "an early failure releases what the deploy took, and only that",
		setup: func(env *deployEnv) {
			env.OnActivity(env.a.PrepareDeploy, mock.Anything, mock.Anything).Return(&activities.PrepareDeployResult{
				Lease: activities.LeaseInfo{ID: "l", Owner: "acme", State: "Active"},
				Plan: activities.DeployPlan{Fingerprint: "0123456789abcdef", ReserveHostnames: []string{"web.example.com"},
					AllocateIPs: []string{"public"}, KeepIPs: map[string]string{"legacy": "192.0.2.7"}}}, nil)
			env.OnActivity(env.a.ApplyDeploy, mock.Anything, mock.Anything).Return(nil, conflict)
		},
		check: func(t *testing.T, env *deployEnv, err error) {
			in := continuedWith(t, err)
			assert.Equal(t, api.PhaseFailed, deployed(in).Carry.Phase)
			assert.Equal(t, [][]string{{"web.example.com"}}, env.released["only hostnames"], "the hostname the deploy reserved, nothing the lease held before")
			assert.Equal(t, [][]string{{"public"}}, env.released["only ips"], "the endpoint the deploy allocated, not the one the lease kept")
			assert.Contains(t, deployed(in).Carry.History[len(deployed(in).Carry.History)-1].Outcome, "released hostname web.example.com, IP of public")
			assert.Empty(t, deployed(in).Carry.Hostnames, "the status holds no hostname the deploy gave back")
		},
	}, {
		name: "a successful deploy records the manifest as last-known-good and continues as new",
		setup: func(env *deployEnv) {
			env.rollouts(api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil)
		},
		check: func(t *testing.T, env *deployEnv, err error) {
			in := continuedWith(t, err)
			assert.Equal(t, api.PhaseActive, deployed(in).Carry.Phase)
			require.NotNil(t, deployed(in).Carry.LastGood)
			assert.Equal(t, "nginx:1.27", deployed(in).Carry.LastGood.Services[0].Image)
			assert.Equal(t, [][]string{{"web.example.com"}}, env.released["hostnames"], "only what the manifest dropped is released")
		},
	}, {
		// Issue 8.4: a scale sent to the lease's running rollout made the
		// lease record the manifest's replicas while another count ran.
		name: "an operator's scale of the rollout is what the lease records",
		setup: func(env *deployEnv) {
			env.rollouts(api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 5}, nil)
		},
		check: func(t *testing.T, env *deployEnv, err error) {
			in := continuedWith(t, err)
			require.NotNil(t, deployed(in).Carry.LastGood)
			assert.Equal(t, int32(5), *deployed(in).Carry.LastGood.Services[0].Replicas)
		},
	}, {
		// Issue 8.4: an undo of the lease's rollout made the lease record
		// "Succeeded" with the new manifest while the old image ran.
		name: "an operator's undo of the rollout is not recorded as the new manifest succeeding",
		setup: func(env *deployEnv) {
			env.rollouts(api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1, UndoneTo: 1}, nil)
		},
		check: func(t *testing.T, env *deployEnv, err error) {
			in := continuedWith(t, err)
			assert.Equal(t, api.PhaseFailed, deployed(in).Carry.Phase)
			assert.Nil(t, deployed(in).Carry.LastGood, "no last-known-good: the first deploy was undone")
			require.NotEmpty(t, deployed(in).Carry.History)
			assert.Contains(t, deployed(in).Carry.History[len(deployed(in).Carry.History)-1].Outcome, api.ErrRolloutUndone)
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newDeployEnv(t, c.setup)
			env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: oneService("l"), Trigger: "test"})
			require.True(t, env.IsWorkflowCompleted())
			c.check(t, env, env.GetWorkflowError())
		})
	}
}

func converterDecode(can *workflow.ContinueAsNewError, out any) error {
	return converter.GetDefaultDataConverter().FromPayloads(can.Input, out)
}

// Issue 11.3 regression: a batched step slower than one Kubernetes call's
// budget (500 deploys sharing the worker's rate limit made ApplyDeploy
// take about a minute, against 30s for one call) timed out on every
// attempt and, redoing the whole step each time, never finished. A batched
// step has a budget of its own (here scaled down to milliseconds).
func TestASlowBatchedStepFinishes(t *testing.T) {
	call, step := flow.KubeCallTimeout, flow.BatchedStepTimeout
	flow.KubeCallTimeout, flow.BatchedStepTimeout = 100*time.Millisecond, 5*time.Second
	t.Cleanup(func() { flow.KubeCallTimeout, flow.BatchedStepTimeout = call, step })
	attempts := 0
	env := newDeployEnv(t, func(env *deployEnv) {
		env.rollouts(api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil)
		env.OnActivity(env.a.ApplyDeploy, mock.Anything, mock.Anything).Return(
			func(context.Context, activities.ApplyDeployInput) (*activities.ApplyDeployResult, error) {
				attempts++
				if attempts > 1 { // the first attempt timed out: end the test here
					return nil, temporal.NewNonRetryableApplicationError("ApplyDeploy retried", "Retried", nil)
				}
				time.Sleep(300 * time.Millisecond) // three calls' budget
				return &activities.ApplyDeployResult{
					IPs:       map[string]string{},
					Hostnames: &activities.HostnamesResult{Reserved: []string{"web.example.com"}},
					Applied:   &activities.ApplyObjectsResult{},
					Classes:   []activities.Classification{{Service: "web", Class: activities.ChangeRollout}},
				}, nil
			})
	})
	env.SetTestTimeout(20 * time.Second)
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: oneService("l"), Trigger: "test"})
	require.True(t, env.IsWorkflowCompleted())
	in := continuedWith(t, env.GetWorkflowError())
	assert.Equal(t, api.PhaseActive, deployed(in).Carry.Phase, deployed(in).Carry.LastError)
	assert.Equal(t, 1, attempts, "one attempt, not timed out")
}

// Issue 35.4: the manifest a lease takes runs hardened (its rollout's
// template has the seccomp profile, no privilege escalation, every
// capability dropped), and the lease records it so; a last-known-good
// manifest accepted before that change is returned to as it ran (its
// rollout's template unhardened, so its ReplicaSet is reused, not rolled).
func TestALeaseTakesAManifestHardenedAndReturnsToAnOldOneAsItRan(t *testing.T) {
	var templates []corev1.PodSpec
	capture := func(env *deployEnv, fail bool) {
		env.OnWorkflow(rollout.RolloutWorkflow, mock.Anything, mock.Anything).Return(
			func(_ workflow.Context, in api.RolloutInput) (*api.RolloutResult, error) {
				templates = append(templates, in.Deployment.Spec.Template.Spec)
				if fail && len(templates) == 1 {
					return nil, temporal.NewNonRetryableApplicationError("web: no progress", api.ErrProgressDeadlineExceeded, nil)
				}
				return &api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil
			})
	}

	env := newDeployEnv(t, func(env *deployEnv) { capture(env, false) })
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: oneService("l"), Trigger: "test"})
	in := continuedWith(t, env.GetWorkflowError())
	require.Len(t, templates, 1)
	sc := templates[0].Containers[0].SecurityContext
	require.NotNil(t, sc, "the rollout's template is hardened")
	assert.False(t, *sc.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, templates[0].SecurityContext.SeccompProfile.Type)
	require.NotNil(t, deployed(in).Carry.LastGood.Services[0].Security, "the lease records the manifest as it took it")

	// A lease whose last-known-good manifest predates the change: a new
	// deploy fails, and the return renders the old template.
	templates = nil
	legacy := oneService("l")
	carry := deployCarry{Phase: api.PhaseActive, LastGood: &legacy, Revision: 1, FewerEvents: true}
	env = newDeployEnv(t, func(env *deployEnv) { capture(env, true) })
	env.SetContinuedExecutionRunID("previous-run")
	env.RegisterDelayedCallback(func() {
		next := oneService("l")
		next.Services[0].Image = "nginx:1.28"
		env.UpdateWorkflow(api.UpdateDeploy, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("deploy refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, api.DeployRequest{Manifest: next, Trigger: "test"})
	}, time.Second)
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: legacy, Trigger: "test", Carry: rawCarry(&carry)})
	require.Len(t, templates, 2, "the new manifest's rollout, then the return")
	assert.NotNil(t, templates[0].Containers[0].SecurityContext, "the new manifest runs hardened")
	assert.Nil(t, templates[1].Containers[0].SecurityContext, "the old manifest's template, as its pods ran")
	assert.Nil(t, templates[1].SecurityContext)

	// A placement's return to the last-known-good manifest (conditional on
	// the lease's last deploy) takes it as recorded: no pod rolls for it.
	// A user's deploy of the same manifest is taken hardened, as its plan
	// shows it.
	for _, tc := range []struct {
		req      api.DeployRequest
		hardened bool
	}{
		{api.DeployRequest{Manifest: legacy, Trigger: "placement", Key: "revert", IfLast: "wave-1"}, false},
		{api.DeployRequest{Manifest: legacy, Trigger: "cli"}, true},
	} {
		templates = nil
		last := carry
		last.History = []api.DeployRecord{{Revision: 1, Key: "wave-1", Outcome: "Succeeded"}}
		env = newDeployEnv(t, func(env *deployEnv) { capture(env, false) })
		env.SetContinuedExecutionRunID("previous-run")
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(api.UpdateDeploy, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("deploy refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
			}, tc.req)
		}, time.Second)
		env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: legacy, Trigger: "test", Carry: rawCarry(&last)})
		require.Len(t, templates, 1, tc.req.Trigger)
		assert.Equal(t, tc.hardened, templates[0].Containers[0].SecurityContext != nil, "%s: hardened", tc.req.Trigger)
	}
}

// Issue 35.2: the lease's "scale" control is held to the operator's bound
// on the lease's replicas (--max-replicas, as its last plan read it, less
// its other services'). Before, it was bounded only by manifest.MaxReplicas
// (1000): a scale past the operator's bound was accepted, queued, and then
// refused by the plan, so the caller was told yes and the deploy failed.
func TestALeasesScaleIsHeldToTheOperatorsReplicaBound(t *testing.T) {
	three, ten := int32(3), int32(10)
	last := manifest.Manifest{Lease: "l", Services: []manifest.Service{
		{Name: "web", Image: "nginx:1.27", Replicas: &three},
		{Name: "api", Image: "nginx:1.27", Replicas: &ten},
	}}
	carry := deployCarry{Phase: api.PhaseActive, LastGood: &last, Revision: 1, FewerEvents: true, Hardened: true,
		Plan: &activities.DeployPlan{Lease: "l", MaxReplicas: 64}}
	var scaled []int32
	env := newDeployEnv(t, func(env *deployEnv) {
		env.OnWorkflow(rollout.RolloutWorkflow, mock.Anything, mock.Anything).Return(
			func(_ workflow.Context, in api.RolloutInput) (*api.RolloutResult, error) {
				scaled = append(scaled, *in.Deployment.Spec.Replicas)
				return &api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: *in.Deployment.Spec.Replicas}, nil
			})
		env.OnActivity(env.a.ApplyDeploy, mock.Anything, mock.Anything).Return(&activities.ApplyDeployResult{
			IPs: map[string]string{}, Hostnames: &activities.HostnamesResult{}, Applied: &activities.ApplyObjectsResult{},
			Classes: []activities.Classification{{Service: "web", Class: activities.ChangeScale}, {Service: "api", Class: activities.ChangeNone}},
		}, nil)
	})
	env.SetContinuedExecutionRunID("previous-run")
	var refused []error
	accepted := 0
	send := func(replicas int32, at time.Duration) {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(api.UpdateScale, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { refused = append(refused, err) }, OnAccept: func() { accepted++ }, OnComplete: func(any, error) {},
			}, api.ScaleServiceRequest{Service: "web", Replicas: replicas})
		}, at)
	}
	send(60, time.Second)
	send(54, 2*time.Second)
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: last, Trigger: "test", Carry: rawCarry(&carry)})

	require.Len(t, refused, 1, "only the scale to 60 is refused: %v", refused)
	assert.EqualError(t, refused[0], "replicas: 60: this provider allows service web at most 54 (the operator's --max-replicas for the lease, 64, less its other services' replicas)")
	assert.Equal(t, 1, accepted)
	assert.Equal(t, []int32{54}, scaled, "the scale to 54 is deployed")
}

// Review of issue 35: a blue-green service scaled below its preview's
// replicas left a last-known-good manifest today's rules refuse (the
// lease's next run checks its carried manifests). The scale is refused,
// naming the bound; at the bound it is taken.
func TestABlueGreenServiceIsNotScaledBelowItsPreview(t *testing.T) {
	four, three := int32(4), int32(3)
	last := manifest.Manifest{Lease: "l", Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &four,
		Ports:   []manifest.Port{{Port: 80}},
		Rollout: &manifest.Rollout{Strategy: manifest.StrategyBlueGreen, BlueGreen: &manifest.BlueGreen{PreviewReplicaCount: &three}}}}}
	require.NoError(t, last.Validate())
	carry := deployCarry{Phase: api.PhaseActive, LastGood: &last, Revision: 1, FewerEvents: true, Hardened: true}
	var refused []string
	accepted := 0
	env := newDeployEnv(t, func(env *deployEnv) {
		env.rollouts(api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 3}, nil)
	})
	env.SetContinuedExecutionRunID("previous-run")
	for i, n := range []int32{2, 3} {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(api.UpdateScale, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { refused = append(refused, err.Error()) }, OnAccept: func() { accepted++ }, OnComplete: func(any, error) {},
			}, api.ScaleServiceRequest{Service: "web", Replicas: n})
		}, time.Duration(i+1)*time.Second)
	}
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: last, Trigger: "test", Carry: rawCarry(&carry)})

	require.Len(t, refused, 1, "%v", refused)
	assert.Equal(t, "replicas: 2 is below service web's blueGreen.previewReplicaCount (3): scale to 3 or more, or deploy a manifest with a smaller previewReplicaCount", refused[0])
	assert.Equal(t, 1, accepted, "the scale to 3 is taken")
}
