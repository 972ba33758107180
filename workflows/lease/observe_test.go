package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/workflows/rollout"
)

// leaseRecord mocks CheckLease, the read of the lease's record that
// confirms an observation saying it closed: active for the first
// activeReads reads, then closed.
func leaseRecord(env *deployEnv, activeReads int) {
	reads := 0
	env.OnActivity(env.a.CheckLease, mock.Anything, "l").Return(func(context.Context, string) (*activities.LeaseInfo, error) {
		if reads++; reads <= activeReads {
			return &activities.LeaseInfo{ID: "l", Owner: "acme", State: "Active"}, nil
		}
		return nil, temporal.NewNonRetryableApplicationError("lease l is Closed", activities.ErrLeaseNotActive, nil)
	})
}

// Unit tests of what an idle lease's workflow does with the observer's
// observations (issue 11.1), on the SDK's test environment. The integration
// tests (observe_integration_test.go) show the same on the real stack.

// idleLease is a lease's workflow continued after a successful deploy of
// web with 2 replicas: Active, waiting for work.
func idleLease(t *testing.T, setup func(*deployEnv)) *deployEnv {
	env := newDeployEnv(t, setup)
	m := oneService("l")
	two := int32(2)
	m.Services[0].Replicas = &two
	env.OnActivity(env.a.DeleteNamespace, mock.Anything, mock.Anything).Return(nil).Maybe()
	env.in = deployInput{DeployInput: api.DeployInput{Manifest: m, Trigger: "test", DegradedAfterSeconds: 10},
		Carry: &deployCarry{Owner: "acme", Phase: api.PhaseActive, LastGood: &m, Revision: 1}}
	env.SetContinuedExecutionRunID("the-run-it-continues") // a carry comes only from the workflow itself
	return env
}

func web(available int32) observe.Observation {
	return observe.Observation{Lease: "l", Services: map[string]observe.ServiceHealth{"web": {Service: "web", Desired: 2, Available: available}}}
}

// observeStep sends one observation at a time after the start and says
// what the workflow must make of it.
type observeStep struct {
	at       time.Duration
	obs      observe.Observation
	rejected string // the rejection's error type, "" if accepted
	recheck  time.Duration
	phase    string // the phase right after
}

func TestIdleLeaseTakesOnlyObservationsThatChangeSomething(t *testing.T) {
	unknown := observe.Observation{Lease: "l", Unknown: true}
	steps := []observeStep{
		{at: time.Second, obs: web(2), rejected: api.ErrObservationKnown, phase: api.PhaseActive},
		// Scaled to 0 by hand: below the manifest's replicas. Degraded only
		// once degradedAfter (10s) has passed since it was first seen; the
		// observer is told when to send it again.
		{at: 2 * time.Second, obs: web(0), recheck: 10 * time.Second, phase: api.PhaseActive},
		{at: 3 * time.Second, obs: web(0), rejected: api.ErrObservationKnown, phase: api.PhaseActive},
		{at: 12 * time.Second, obs: web(0), phase: api.PhaseDegraded},
		{at: 13 * time.Second, obs: web(0), rejected: api.ErrObservationKnown, phase: api.PhaseDegraded},
		{at: 14 * time.Second, obs: web(2), phase: api.PhaseActive},
		// Could not observe: Unknown, never Degraded; once.
		{at: 15 * time.Second, obs: unknown, phase: api.PhaseUnknown},
		{at: 16 * time.Second, obs: unknown, rejected: api.ErrObservationKnown, phase: api.PhaseUnknown},
		{at: 17 * time.Second, obs: web(2), phase: api.PhaseActive},
		// A service with no ReplicaSet at all (deleted by hand) is below
		// its replicas too.
		{at: 18 * time.Second, obs: observe.Observation{Lease: "l"}, recheck: 10 * time.Second, phase: api.PhaseActive},
		{at: 19 * time.Second, obs: web(2), phase: api.PhaseActive},
		// Another lease's observation is refused, naming the field.
		{at: 20 * time.Second, obs: observe.Observation{Lease: "other", Closed: true}, rejected: "lease", phase: api.PhaseActive},
		// Issue 35.2: "closed" is a hint; the lease's record, read, says
		// Active (an observe update typed by hand tore the lease down).
		{at: 25 * time.Second, obs: observe.Observation{Lease: "l", Closed: true}, phase: api.PhaseActive},
	}
	env := idleLease(t, func(env *deployEnv) { leaseRecord(env, 1) })
	for i, s := range steps {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(api.UpdateObserve, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) {
					var appErr *temporal.ApplicationError
					switch {
					case s.rejected == "":
						t.Errorf("step %d (%+v): rejected: %v", i, s.obs, err)
					case errors.As(err, &appErr) && appErr.Type() != "":
						assert.Equal(t, s.rejected, appErr.Type(), "step %d", i)
					default:
						assert.Contains(t, err.Error(), s.rejected+":", "step %d: the error names the field", i)
					}
				},
				OnAccept: func() {
					if s.rejected != "" {
						t.Errorf("step %d (%+v): accepted, want rejected %s", i, s.obs, s.rejected)
					}
				},
				OnComplete: func(res any, err error) {
					require.NoError(t, err)
					assert.Equal(t, s.recheck, res.(observe.ObserveResult).RecheckAfter, "step %d: recheck", i)
				},
			}, s.obs)
		}, s.at)
		env.RegisterDelayedCallback(func() {
			st := env.status(t)
			assert.Equal(t, s.phase, st.Phase, "step %d (%+v)", i, s.obs)
		}, s.at+500*time.Millisecond)
	}
	// Then the lease closes: torn down at once.
	runUntilClosedAt(t, env, 30*time.Second)
	var st api.DeployStatus
	require.NoError(t, env.GetWorkflowResult(&st))
	assert.Equal(t, api.PhaseTornDown, st.Phase)
	env.AssertNotCalled(t, "ObserveLease", mock.Anything, mock.Anything)
	env.AssertNumberOfCalls(t, "CheckLease", 2) // once per "closed", to confirm it
}

// Guards the phase of a lease whose last deploy failed: an observation
// that could not be made turns it Unknown, and the next healthy one turned
// it Active, as if the failed deploy had succeeded (make chaos: the API
// server stopped for 30 s after a failed update was reverted; the lease
// read "Active #2" for good). It returns to Failed, and so it does after a
// dip below its replicas.
func TestAFailedLeaseObservedAgainAfterAnOutageIsStillFailed(t *testing.T) {
	unknown := observe.Observation{Lease: "l", Unknown: true}
	env := idleLease(t, func(env *deployEnv) { leaseRecord(env, 0) })
	failed := oneService("l") // the manifest whose deploy failed
	failed.Services[0].Image = "nginx:1.28"
	env.in.Carry.Phase, env.in.Carry.LastFailed, env.in.Carry.Revision = api.PhaseFailed, &failed, 2
	steps := []observeStep{
		{at: time.Second, obs: unknown, phase: api.PhaseUnknown},
		{at: 2 * time.Second, obs: web(2), phase: api.PhaseFailed},
		{at: 3 * time.Second, obs: web(0), recheck: 10 * time.Second, phase: api.PhaseFailed},
		{at: 14 * time.Second, obs: web(0), phase: api.PhaseDegraded},
		{at: 15 * time.Second, obs: web(2), phase: api.PhaseFailed},
	}
	// Its own check after a dip, as the observer's fallback.
	healthy := web(2)
	env.OnActivity(env.a.ObserveLease, mock.Anything, mock.Anything).Return(&healthy, nil).Maybe()
	for i, s := range steps {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(api.UpdateObserve, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("step %d (%+v): rejected: %v", i, s.obs, err) },
				OnAccept: func() {}, OnComplete: func(any, error) {},
			}, s.obs)
		}, s.at)
		env.RegisterDelayedCallback(func() {
			assert.Equal(t, s.phase, env.status(t).Phase, "step %d (%+v)", i, s.obs)
		}, s.at+500*time.Millisecond)
	}
	runUntilClosedAt(t, env, 30*time.Second)
}

// Guards an Active lease from a stale send (CI run 95: a lease of
// TestLiveUpgradeInTheMiddleOfTwentyDeploys turned Degraded 73 s after its
// deploy ended, every replica available): an observation read while the
// deploy rolled out, its dip beginning then, sent again after the run
// ended (its first send not answered by the loaded workflow). Its since,
// moved up to the new run's start, was past degradedAfter: Degraded at
// once. An observation read before the run started is now sent again as
// seen now; a fresh one of the same dip counts from when it was seen.
func TestAnObservationReadBeforeTheRunStartedIsSentAgainAsSeenNow(t *testing.T) {
	env := idleLease(t, func(env *deployEnv) { leaseRecord(env, 0) })
	healthy := web(2) // its own check after a dip, as the observer's fallback
	env.OnActivity(env.a.ObserveLease, mock.Anything, mock.Anything).Return(&healthy, nil).Maybe()
	start := env.Now()
	send := func(at time.Duration, obs func() observe.Observation, check func(rejected error, res *observe.ObserveResult)) {
		env.RegisterDelayedCallback(func() {
			var rejected error
			env.UpdateWorkflow(api.UpdateObserve, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { rejected = err; check(err, nil) },
				OnAccept: func() {},
				OnComplete: func(res any, err error) {
					require.NoError(t, err)
					r := res.(observe.ObserveResult)
					check(rejected, &r)
				},
			}, obs())
		}, at)
	}
	stale := func() observe.Observation {
		o := web(0)
		o.Since, o.At = start.Add(-40*time.Second), start.Add(-time.Second) // read during the deploy
		return o
	}
	send(15*time.Second, stale, func(rejected error, _ *observe.ObserveResult) {
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(rejected, &appErr), "a stale observation must not be taken: %v", rejected)
		assert.Equal(t, api.ErrObservationDeferred, appErr.Type())
		var res observe.ObserveResult
		require.NoError(t, appErr.Details(&res))
		assert.Equal(t, busyRetry, res.RecheckAfter, "sent again shortly, as seen then")
	})
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, api.PhaseActive, env.status(t).Phase, "a stale dip does not make the lease Degraded")
	}, 15*time.Second+500*time.Millisecond)
	// The same dip seen now (the observer read it again): counted from
	// when it was seen, Degraded after degradedAfter (10 s).
	fresh := func() observe.Observation {
		o := web(0)
		o.Since, o.At = env.Now().Add(-time.Second), env.Now()
		return o
	}
	send(16*time.Second, fresh, func(rejected error, res *observe.ObserveResult) {
		require.NoError(t, rejected)
		assert.Equal(t, 9*time.Second, res.RecheckAfter, "degradedAfter from when it was first seen")
	})
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, api.PhaseActive, env.status(t).Phase)
	}, 16*time.Second+500*time.Millisecond)
	runUntilClosedAt(t, env, 30*time.Second)
}

// runUntilClosedAt runs the idle lease's workflow until an observation
// saying it closed, sent at at, ends it without an error.
func runUntilClosedAt(t *testing.T, env *deployEnv, at time.Duration) {
	t.Helper()
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdateObserve, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("closed: rejected: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, observe.Observation{Lease: "l", Closed: true})
	}, at)
	env.ExecuteWorkflow(DeployWorkflow, env.in.encode())
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
}

// With no observation the idle lease checks itself once an hour (the
// safety net), from one observation: a lease that closed while every
// worker was down is torn down then.
func TestIdleLeaseSafetyNetIsOneObservationAnHour(t *testing.T) {
	var calls []time.Duration
	var start time.Time
	env := idleLease(t, func(env *deployEnv) {
		env.OnActivity(env.a.ObserveLease, mock.Anything, "l").Return(func(context.Context, string) (*observe.Observation, error) {
			calls = append(calls, env.Now().Sub(start))
			if len(calls) < 3 {
				o := web(2)
				return &o, nil
			}
			return &observe.Observation{Lease: "l", Closed: true}, nil
		})
		leaseRecord(env, 0)
	})
	start = env.Now()
	env.ExecuteWorkflow(DeployWorkflow, env.in.encode())
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, calls, 3)
	for i, at := range calls {
		assert.InDelta(t, float64(time.Duration(i+1)*time.Hour), float64(at), float64(time.Minute), "tick %d at %v", i, at)
	}
	env.AssertNumberOfCalls(t, "CheckLease", 1) // once, to confirm the close
}

// A deploy in progress defers observations (its rollouts watch the
// services); the observer sends them again later.
func TestObservationsWaitWhileADeployRuns(t *testing.T) {
	env := newDeployEnv(t, func(env *deployEnv) {
		env.OnWorkflow(rollout.RolloutWorkflow, mock.Anything, mock.Anything).After(time.Minute).Return(&api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil)
	})
	var rejected error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdateObserve, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, web(0))
	}, 10*time.Second)
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: oneService("l"), Trigger: "test"})
	require.True(t, env.IsWorkflowCompleted())
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(rejected, &appErr), "want a typed rejection, got %v", rejected)
	assert.Equal(t, api.ErrObservationDeferred, appErr.Type())
}

func (env *deployEnv) status(t *testing.T) api.DeployStatus {
	t.Helper()
	v, err := env.QueryWorkflow(api.QueryStatus)
	require.NoError(t, err)
	var st api.DeployStatus
	require.NoError(t, v.Get(&st))
	return st
}

// A lease closed while its deploy waits for a long rollout is torn down as
// soon as the observer tells (its rollout cancelled), not on the next lease
// check: before fewer-events the observation was deferred until the deploy
// ended and the wait re-checked the lease every 30s. Other observations wait for the
// deploy to end (its rollouts watch the services).
func TestALeaseClosedMidRolloutIsTornDownWhenObserved(t *testing.T) {
	env := newDeployEnv(t, func(env *deployEnv) {
		// A rollout that takes an hour, unless cancelled.
		env.OnWorkflow(rollout.RolloutWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, _ api.RolloutInput) (*api.RolloutResult, error) {
			if err := workflow.Sleep(ctx, time.Hour); err != nil {
				return nil, err
			}
			return &api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil
		})
	})
	env.OnActivity(env.a.DeleteNamespace, mock.Anything, mock.Anything).Return(nil).Maybe()
	leaseRecord(env, 0)
	send := func(o observe.Observation, check func(error)) {
		env.UpdateWorkflow(api.UpdateObserve, "", &testsuite.TestUpdateCallback{
			OnReject: check, OnAccept: func() { check(nil) }, OnComplete: func(any, error) {},
		}, o)
	}
	env.RegisterDelayedCallback(func() {
		send(web(0), func(err error) {
			var appErr *temporal.ApplicationError
			if assert.True(t, errors.As(err, &appErr), "a health observation mid-deploy is deferred, got %v", err) {
				assert.Equal(t, api.ErrObservationDeferred, appErr.Type())
			}
		})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		send(observe.Observation{Lease: "l", Closed: true}, func(err error) {
			assert.NoError(t, err, "the closed lease's observation is taken mid-rollout")
		})
	}, 2*time.Minute)
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: oneService("l"), Trigger: "test"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var st api.DeployStatus
	require.NoError(t, env.GetWorkflowResult(&st))
	assert.Equal(t, api.PhaseTornDown, st.Phase)
	assert.Equal(t, "Interrupted by teardown", st.History[len(st.History)-1].Outcome, "the rollout was cancelled, not waited for")
	env.AssertNumberOfCalls(t, "CheckLease", 1) // once, to confirm the close, not a lease check every 30s
}

// Issue 22, the observer's cost during a fleet: a deferred observation
// says whether the observer should wait for the run's end (a deploy is in
// progress: the run ends with it) or send again shortly (the workflow is
// between two waits: its run goes on). Without the difference the
// observer waited for the end of an idle run that had just started, and
// held the lease's observations for a minute.
func TestADeferredObservationSaysWhetherTheRunIsDeploying(t *testing.T) {
	w := &deployRun{lease: "l"} // between two waits
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(w.takesObservation(&observe.Observation{Lease: "l"}), &appErr))
	assert.Equal(t, api.ErrObservationDeferred, appErr.Type())
	var res observe.ObserveResult
	require.NoError(t, appErr.Details(&res), "a busy workflow says when to send again")
	assert.Equal(t, busyRetry, res.RecheckAfter)

	m := oneService("l")
	w.requested = &m // deploying
	require.True(t, errors.As(w.takesObservation(&observe.Observation{Lease: "l"}), &appErr))
	assert.Equal(t, api.ErrObservationDeferred, appErr.Type())
	assert.False(t, appErr.HasDetails(), "a deploying workflow is sent again when its run ends")
}
