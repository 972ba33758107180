package lease

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/observe"
)

// How a lease's workflow learns what happens to its workload while idle:
// the worker's observer (internal/observe) sends it an Observation through
// the "observe" update when something it decides on changes, and one slow
// safety-net timer (healthIntervalSeconds, by default an hour) reads the
// same observation itself, in case every worker missed the change. Nothing
// polls: an idle lease costs one timer an hour.

// busyRetry is how soon the observer sends again an observation deferred
// while the workflow is between two waits, not deploying.
const busyRetry = time.Second

// defaultSafetyNet is the idle lease's one timer when the observer tells it
// of changes (healthIntervalSeconds unset).
const defaultSafetyNet = time.Hour

// idleInterval is how long the idle workflow waits before checking the
// lease itself.
func (w *deployRun) idleInterval() time.Duration {
	if w.in.HealthIntervalSeconds <= 0 {
		return defaultSafetyNet
	}
	return w.healthInterval
}

func (w *deployRun) registerObserve() error {
	return workflow.SetUpdateHandlerWithOptions(w.ctx, api.UpdateObserve,
		func(_ workflow.Context, o observe.Observation) (observe.ObserveResult, error) {
			w.observation = &o
			return observe.ObserveResult{RecheckAfter: w.recheckAfter(&o)}, nil
		},
		workflow.UpdateHandlerOptions{
			Description: "What the worker's observer sees of the lease (sent by the worker, not by people)",
			Validator: func(_ workflow.Context, o observe.Observation) error {
				return w.takesObservation(&o)
			},
		})
}

// takesObservation decides whether o changes anything this workflow
// decides on; if not, the update is rejected (and leaves no history).
func (w *deployRun) takesObservation(o *observe.Observation) error {
	switch {
	case o.Lease != w.lease:
		return fmt.Errorf("lease: the observation is of lease %q, this workflow deploys lease %q", o.Lease, w.lease)
	case w.Teardown || w.leaseGone:
		return known("the lease is being torn down")
	case o.Closed && w.rollingOut && w.Batches():
		return nil // the rollouts are cancelled and the lease torn down
	case !w.idle && w.requested != nil:
		// The observer sends it again when this run ends: a deploy ends its
		// run (the workflow continues as new).
		return temporal.NewApplicationError("a deploy is in progress; its rollouts watch the services", api.ErrObservationDeferred)
	case !w.idle:
		// Between two waits (the run starting, or acting on the last
		// observation): idle again in a moment, in this run.
		return temporal.NewApplicationError("the workflow is busy; send again shortly", api.ErrObservationDeferred, observe.ObserveResult{RecheckAfter: busyRetry})
	case !o.At.IsZero() && o.At.Before(workflow.GetInfo(w.ctx).WorkflowStartTime):
		// Read before this run started, while the deploy that ended the
		// last one rolled out: a send that workflow answered late (a
		// loaded worker) going again under its update ID. Its dip is the
		// rollout's, and its since, moved up to this run's start, would
		// make a lease that has every replica Degraded (CI run 95). The
		// observer reads its cache again and sends what it sees now.
		return temporal.NewApplicationError("the observation was read before this run started (during the deploy before it); send what is seen now", api.ErrObservationDeferred, observe.ObserveResult{RecheckAfter: busyRetry})
	case w.observation != nil && w.observation.Key() == o.Key():
		// Another observer's, in the same workflow task: the same change.
		return temporal.NewApplicationError("already taken, not yet acted on", api.ErrObservationKnown, observe.ObserveResult{RecheckAfter: w.recheckAfter(o)})
	case o.Closed:
		return nil
	case w.current == nil:
		return known("nothing is deployed")
	case o.Unknown:
		if w.Phase == api.PhaseUnknown {
			return known("already Unknown")
		}
		return nil
	case w.Phase == api.PhaseUnknown:
		return nil
	case w.healthyIn(o):
		if w.unhealthySince.IsZero() && w.Phase != api.PhaseDegraded {
			return known("already healthy")
		}
		return nil
	case w.unhealthySince.IsZero():
		return nil
	case w.Phase != api.PhaseDegraded && w.recheckAfter(o) == 0:
		return nil // degradedAfter has passed
	default:
		return temporal.NewApplicationError("already below its replicas", api.ErrObservationKnown, observe.ObserveResult{RecheckAfter: w.recheckAfter(o)})
	}
}

func known(why string) error { return temporal.NewApplicationError(why, api.ErrObservationKnown) }

// healthyIn reports whether every service of the deployed manifest has its
// replicas available in o. A service without ReplicaSets (deleted by hand)
// is not.
func (w *deployRun) healthyIn(o *observe.Observation) bool {
	if w.current == nil {
		return true
	}
	for _, s := range w.current.Services { // with their defaults (lease/intake.go)
		want := *s.Replicas
		if want == 0 {
			continue
		}
		if h, ok := o.Services[s.Name]; !ok || h.Available < want {
			return false
		}
	}
	return true
}

// unhealthyFrom is when the lease was first seen below its replicas: the
// earlier of the workflow's and the observer's, but not before this run
// started (a run starts when the last deploy ended: its rollout's own
// dips do not count) nor in the future.
func (w *deployRun) unhealthyFrom(o *observe.Observation) time.Time {
	since := w.unhealthySince
	if !o.Since.IsZero() && (since.IsZero() || o.Since.Before(since)) {
		since = o.Since
	}
	if start := workflow.GetInfo(w.ctx).WorkflowStartTime; !since.IsZero() && since.Before(start) {
		since = start
	}
	if now := workflow.Now(w.ctx); since.IsZero() || since.After(now) {
		return now
	}
	return since
}

// recheckAfter is how long until an unhealthy lease turns Degraded; zero
// when it is healthy, not observable, or due now.
func (w *deployRun) recheckAfter(o *observe.Observation) time.Duration {
	if o.Closed || o.Unknown || w.healthyIn(o) || w.Phase == api.PhaseDegraded {
		return 0
	}
	left := w.degradedAfter - workflow.Now(w.ctx).Sub(w.unhealthyFrom(o))
	return max(left, 0)
}

// takeObservation acts on an observation: a closed lease is torn down (or,
// with nothing deployed, its workflow ends) once its record says so;
// Unknown is never Degraded.
func (w *deployRun) takeObservation(o *observe.Observation) {
	switch {
	case o.Closed && !w.closeConfirmed():
		// A hint that did not hold: nothing changes.
	case o.Closed && w.LastGood == nil && w.current == nil:
		w.leaseGone = true
	case o.Closed:
		w.Teardown = true
	case o.Unknown:
		w.observe(false, false)
	default:
		healthy := w.healthyIn(o)
		if !healthy {
			w.unhealthySince = w.unhealthyFrom(o)
		}
		w.observe(true, healthy)
	}
}

// closeConfirmed reads the lease's record when an observation says it
// closed (issue 35.2): an observation is a hint, the observer's or one
// typed by hand into the "observe" update, and nothing is torn down on a
// hint. Closed, or gone, it is; Active, or a record that cannot be read
// (never "closed"), it is not.
func (w *deployRun) closeConfirmed() bool {
	if !w.confirmsClose() {
		return true
	}
	active, err := w.leaseActive()
	switch {
	case err != nil:
		workflow.GetLogger(w.ctx).Warn("an observation says the lease closed; its record could not be read: nothing is torn down", "lease", w.lease, "error", err)
	case active:
		workflow.GetLogger(w.ctx).Warn("an observation says the lease closed; its record says it is active: nothing is torn down", "lease", w.lease)
	}
	return err == nil && !active
}

// monitor is the health monitor's tick: a closed lease tears down; fewer
// available replicas than desired for longer than degradedAfter is Degraded;
// a cluster that cannot be observed is Unknown — never Degraded, never a
// reason to tear anything down.
func (w *deployRun) monitor() {
	w.takeObservation(w.observeLease())
}

// observe moves the phase on one health observation.
func (w *deployRun) observe(observed, healthy bool) {
	now := workflow.Now(w.ctx)
	switch {
	case !observed:
		w.setPhase(api.PhaseUnknown)
	case healthy:
		w.unhealthySince = time.Time{}
		switch {
		case w.Phase == api.PhaseFailed:
		case w.LastFailed != nil:
			// Observed healthy again after Unknown or Degraded: what runs
			// is the last-known-good version, and the last deploy still
			// failed. Before, it turned Active (make chaos: the API server
			// stopped after a failed update was reverted); the same command
			// either way, so histories replay.
			w.setPhase(api.PhaseFailed)
		default:
			w.setPhase(api.PhaseActive)
		}
	default:
		if w.unhealthySince.IsZero() {
			w.unhealthySince = now
		}
		if now.Sub(w.unhealthySince) >= w.degradedAfter {
			w.setPhase(api.PhaseDegraded)
		}
	}
}

func isLeaseNotActive(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == api.ErrLeaseNotActive
}
