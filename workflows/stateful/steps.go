package stateful

import (
	"errors"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/statefulset"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// The rollout's steps: each lowers the partition toward a target (a
// canary's weight, then 0) as statefulset.Next decides, and waits for the
// pods it released; a pause step waits for its time or a promote. Where a
// step touches the cluster is calls.go.

var (
	errAbort         = errors.New("aborted by an operator")
	errDeadline      = errors.New("progress deadline exceeded")
	errContinueAsNew = errors.New("history long: continue as new")
)

// maxIdleWait bounds one wait when nothing is due (a paused rollout, a
// pause step without duration); the wait adds no history meanwhile.
const maxIdleWait = 6 * time.Hour

// maxStepWait bounds one wait for the pods: a wait that saw nothing
// change is taken again, with the deadline checked in between.
const maxStepWait = 10 * time.Minute

// runSteps takes the canary's remaining steps, then the partition down
// to 0. A return to the previous revision takes no canary step.
func (r *run) runSteps() error {
	r.startBackground()
	for !r.Reverting && r.StepIndex < len(r.in.Steps) {
		if err := r.heldByBackground(); err != nil {
			return err
		}
		s := r.in.Steps[r.StepIndex]
		var err error
		switch {
		case s.SetWeight != nil:
			err = r.stepTo(statefulset.PartitionFor(*s.SetWeight, r.state.Replicas))
		case s.Pause != nil:
			err = r.pauseStep(s.Pause)
		case s.Analysis != nil:
			err = r.analyze(s.Analysis)
		}
		if err != nil {
			return err
		}
		r.StepIndex++
	}
	if !r.Reverting {
		// An inconclusive background verdict in the last step holds the
		// rollout before the rest of the ordinals are released, as before
		// any step.
		if err := r.heldByBackground(); err != nil {
			return err
		}
	}
	return r.stepTo(0)
}

// stepTo lowers the partition to target, a step at a time, until every
// ordinal at or above it runs the update revision and is available.
func (r *run) stepTo(target int32) error {
	r.target = target
	if r.ProgressAt.IsZero() {
		r.ProgressAt = workflow.Now(r.ctx)
	}
	for {
		switch {
		case r.abort && r.Outcome == "":
			return errAbort
		case r.long():
			return errContinueAsNew
		}
		s := statefulset.Next(r.state.Observed, target, r.maxUnavailable())
		r.step = s
		if s.Updated > r.Updated && !r.state.Stale {
			// Progress is a new high of updated, available ordinals: a pod
			// that falls back and returns is not progress twice. A stale
			// read's count is of the revision before a write (a return's
			// template written back: the failed revision's pods) and is
			// not progress.
			r.Updated, r.ProgressAt = s.Updated, workflow.Now(r.ctx)
		}
		if r.Paused {
			if err := r.waitPaused(); err != nil {
				return err
			}
			continue
		}
		forced := false // pods of the forced rollback deleted by this pass
		if !r.state.Stale {
			if r.Reverting {
				// The forced rollback: a pod of the other revision that never
				// turned Ready holds the controller's OrderedReady way back.
				// The partition first goes down to where a deleted pod comes
				// back at the revision returned to.
				p, del := statefulset.ForcedRollback(r.state.Observed)
				if p < r.state.Partition {
					if err := r.setPartition(p); err != nil {
						return err
					}
					continue
				}
				if len(del) > 0 {
					if err := r.deleteStuck(del); err != nil {
						return err
					}
					forced = true
				}
			}
			if s.Partition != r.state.Partition && !forced {
				if err := r.setPartition(s.Partition); err != nil {
					return err
				}
				r.ProgressAt = workflow.Now(r.ctx)
				continue
			}
			if s.Reached && !forced {
				return nil
			}
		}
		// The deadline is checked before every wait, and after a forced
		// rollback's deletes too: pods that keep coming back never Ready
		// end the return at its deadline, not in a loop of deletes.
		left := time.Duration(r.deadlineSeconds())*time.Second - workflow.Now(r.ctx).Sub(r.ProgressAt)
		if left <= 0 {
			return errDeadline
		}
		if err := r.waitForStep(min(left, maxStepWait), !forced); err != nil {
			return err
		}
	}
}

// pauseStep waits for the pause's time, or until promoted.
func (r *run) pauseStep(p *manifest.Pause) error {
	if p.Duration != "" && r.pauseEnds.IsZero() {
		d, _ := time.ParseDuration(p.Duration) // validated (guard)
		r.pauseEnds = workflow.Now(r.ctx).Add(d)
	}
	r.gate = "pause"
	defer func() { r.gate, r.promote = "", false }()
	for {
		switch {
		case r.abort && r.Outcome == "":
			r.pauseEnds = time.Time{}
			return errAbort
		case r.promote || !r.pauseEnds.IsZero() && !workflow.Now(r.ctx).Before(r.pauseEnds):
			r.ProgressAt, r.pauseEnds = workflow.Now(r.ctx), time.Time{}
			return nil
		case r.long():
			return errContinueAsNew // the continued run waits out the rest (pauseEnds is carried)
		}
		wait := maxIdleWait
		if !r.pauseEnds.IsZero() {
			wait = r.pauseEnds.Sub(workflow.Now(r.ctx))
		}
		// A long history (a background analysis measures meanwhile) ends
		// the wait too: the run continues as new.
		if _, err := workflow.AwaitWithTimeout(r.ctx, wait, func() bool { return r.abort || r.promote || r.long() }); err != nil {
			return err
		}
	}
}

// waitPaused holds the rollout until resumed or aborted; the deadline
// does not run meanwhile (as a paused Deployment's).
func (r *run) waitPaused() error {
	// A long history ends the wait too: stepTo continues as new, paused.
	_, err := workflow.AwaitWithTimeout(r.ctx, maxIdleWait, func() bool { return !r.Paused || r.abort || r.long() })
	r.ProgressAt = workflow.Now(r.ctx)
	return err
}

// canReturn reports whether there is a previous revision to return to: a
// Stable one, unless the pods' update revision is it already. A stale read
// (the template just written, its revision not yet in the status) may
// still show Stable as the update revision: the return is taken then (an
// unchanged template is not written again, and its steps find every pod
// there).
func (r *run) canReturn() bool {
	return r.Stable != "" && (r.state.Stale || r.Stable != r.state.UpdateRevision)
}

// returnToStable writes the previous revision's template back; the same
// steps then return the released ordinals to it, deleting pods of the
// failed revision that never turned Ready.
func (r *run) returnToStable(why error) error {
	r.Outcome = api.OutcomeRolledBack
	if why == errAbort {
		r.Outcome = api.OutcomeAborted
	}
	workflow.GetLogger(r.ctx).Warn("returning to the previous revision", "service", r.in.Service, "revision", r.Stable, "reason", r.Outcome)
	if err := r.revert(); err != nil {
		return err
	}
	r.Reverting, r.Paused, r.abort = true, false, false
	r.ProgressAt, r.Updated = workflow.Now(r.ctx), 0
	r.Held, r.BackgroundHeld = "", "" // a return holds for no verdict
	return nil
}

// long reports whether the run's history is long enough to continue as
// new (every handler finished: none is cut off).
func (r *run) long() bool {
	info := workflow.GetInfo(r.ctx)
	return (info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > flow.ContinueAsNewAfter) &&
		workflow.AllHandlersFinished(r.ctx)
}

// settle records the controls handled in this task in a task of their
// own before the run ends: a task refused at the end would take the
// updates it accepted with it (as rollout.settleControls).
func (r *run) settle() {
	_ = workflow.Await(r.ctx, func() bool { return workflow.AllHandlersFinished(r.ctx) })
	if r.unsettled {
		_ = workflow.Sleep(r.ctx, time.Millisecond)
		r.unsettled = false
	}
}
