package stateful

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// A stateful canary's analysis steps: measured against the ordinals its
// last setWeight released, interval apart (flow.RunAnalysis, as a
// Deployment's canary), and judged by internal/analysis. A failed verdict
// aborts: the released ordinals return to the previous revision, each with
// its claims. An inconclusive one holds the rollout for a human (promote
// goes on, abort returns). What could not be measured is never a failure.

// analyze takes analysis step a to its verdict; nil goes on to the next
// step.
func (r *run) analyze(a *manifest.Analysis) error {
	if r.Tally == nil {
		r.Tally = &analysis.Tally{}
	}
	r.gate = "analysis"
	defer func() { r.gate = "" }()
	moveOn := func() bool { return r.abort || r.promote }
	verdict, err := flow.RunAnalysis(a, r.Tally, flow.AnalysisRun{
		Stop: r.long, // the tally goes on in the continued run
		Wait: func(d time.Duration) (bool, error) {
			if _, err := workflow.AwaitWithTimeout(r.ctx, d, func() bool { return moveOn() || r.long() }); err != nil {
				return true, err
			}
			return moveOn() || r.long(), nil
		},
		Measure: func() (analysis.Phase, string) {
			m := flow.Measured{Namespace: r.in.Namespace, Service: r.in.Service}
			if a.Job != nil {
				r.jobs++
				m.Job = flow.AnalysisJobName(r.in.Service, workflow.GetInfo(r.ctx).WorkflowExecution.RunID, r.jobs)
			}
			return flow.Measure(r.ctx, a, m)
		},
		Report: func(msg string) { r.Measured = msg },
	})
	if err != nil {
		return err
	}
	for {
		switch {
		case r.abort && r.Outcome == "":
			return errAbort
		case r.promote:
			r.promote, r.Tally, r.Held = false, nil, ""
			r.ProgressAt = workflow.Now(r.ctx)
			return nil
		case verdict == analysis.Failed:
			r.Reason = fmt.Sprintf("analysis failed: %s (last: %s)", r.Tally, r.Measured)
			r.abort = true
			workflow.GetLogger(r.ctx).Warn("stateful canary analysis failed", "service", r.in.Service, "reason", r.Reason)
			return errAbort
		case verdict == analysis.Successful:
			r.Tally, r.Held = nil, ""
			r.ProgressAt = workflow.Now(r.ctx)
			return nil
		case r.long():
			return errContinueAsNew
		case verdict == analysis.Running:
			// Stopped for a long history: the tally goes on in the
			// continued run.
			return errContinueAsNew
		}
		// Inconclusive: held for a human; the deadline does not run.
		r.Held = fmt.Sprintf("analysis inconclusive: %s (last: %s); promote to go on, abort to return to the previous revision", r.Tally, r.Measured)
		if _, err := workflow.AwaitWithTimeout(r.ctx, maxIdleWait, func() bool { return moveOn() || r.long() }); err != nil {
			return err
		}
	}
}

// startBackground runs the canary's background analysis, if it has one,
// beside its steps until they end: a failed verdict aborts (the released
// ordinals return to the previous revision), an inconclusive one holds
// the rollout before its next step (heldByBackground). What could not be
// measured is never a failure.
func (r *run) startBackground() {
	a := r.in.Background
	if a == nil || r.Reverting || r.StepIndex >= len(r.in.Steps) {
		return
	}
	if r.Background == nil {
		r.Background = &analysis.Tally{}
	}
	over := func() bool {
		return r.StepIndex >= len(r.in.Steps) || r.abort || r.Outcome != "" || r.Reverting
	}
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		for !over() {
			if r.Background.Measured > 0 {
				if _, err := workflow.AwaitWithTimeout(ctx, a.IntervalDuration(), over); err != nil || over() {
					return
				}
			}
			m := flow.Measured{Namespace: r.in.Namespace, Service: r.in.Service}
			if a.Job != nil {
				r.jobs++
				m.Job = flow.AnalysisJobName(r.in.Service, workflow.GetInfo(ctx).WorkflowExecution.RunID, r.jobs)
			}
			phase, msg := flow.Measure(ctx, a, m)
			if over() {
				return
			}
			r.BackgroundMeasured = msg
			r.Background.Add(phase)
			switch {
			case r.Background.Failed > a.FailureLimit:
				r.Reason = fmt.Sprintf("background analysis failed: %s (last: %s)", r.Background, msg)
				r.abort = true
				workflow.GetLogger(ctx).Warn("stateful canary background analysis failed", "service", r.in.Service, "reason", r.Reason)
				if r.wake != nil {
					r.wake()
				}
				return
			case r.Background.Inconclusive > a.InconclusiveLimit && r.BackgroundHeld == "":
				r.BackgroundHeld = fmt.Sprintf("background analysis inconclusive: %s (last: %s); promote to go on, abort to return to the previous revision", r.Background, msg)
			}
		}
	})
}

// heldByBackground holds the rollout before its next step while an
// inconclusive background analysis waits for a human: promote goes on
// (the background measures afresh), abort returns.
func (r *run) heldByBackground() error {
	if r.BackgroundHeld == "" {
		return nil
	}
	r.gate = "background analysis"
	defer func() { r.gate = "" }()
	for {
		switch {
		case r.abort && r.Outcome == "":
			return errAbort
		case r.promote:
			r.promote, r.BackgroundHeld = false, ""
			r.Background = &analysis.Tally{}
			r.ProgressAt = workflow.Now(r.ctx)
			return nil
		case r.long():
			return errContinueAsNew
		}
		if _, err := workflow.AwaitWithTimeout(r.ctx, maxIdleWait, func() bool { return r.abort || r.promote || r.long() }); err != nil {
			return err
		}
	}
}
