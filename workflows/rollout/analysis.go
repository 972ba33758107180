package rollout

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// Analysis gates (issue 12.3): a canary's analysis steps, a blue-green's
// pre- and post-promotion analyses and a background analysis all take
// their measurements here, interval apart; internal/analysis judges them.

// runGate takes a's measurements into t, interval apart, until its verdict
// is in, and returns it; last is the last measurement, as the status shows
// it. It returns Running if skip became true first (promoted past the
// gate, or aborted), or the history is long (the run continues as new and
// its successor goes on with t).
func (r *rolloutRun) runGate(a *manifest.Analysis, t *analysis.Tally, last *string, skip func() bool) (analysis.Phase, error) {
	return flow.RunAnalysis(a, t, flow.AnalysisRun{
		Stop: r.long, // the tally goes on in the continued run
		Wait: func(d time.Duration) (bool, error) {
			if _, err := workflow.AwaitWithTimeout(r.ctx, d, r.orLong(skip)); err != nil {
				return true, err
			}
			return skip() || r.long(), nil
		},
		Measure: func() (analysis.Phase, string) { return r.measure(r.ctx, a) },
		Report:  func(msg string) { *last = msg },
	})
}

// measure is one measurement, judged. What could not be measured is
// inconclusive, never a failure.
// ctx is the calling coroutine's (a background analysis runs in its own).
func (r *rolloutRun) measure(ctx workflow.Context, a *manifest.Analysis) (analysis.Phase, string) {
	var m activities.Measurement
	// The activity judges (issue 20.1); runs before the gate judge here.
	var judge *analysis.Conditions
	if judgesWhereMeasured(ctx) {
		c := analysis.ConditionsOf(a)
		judge = &c
	}
	measured := flow.Measured{Namespace: r.in.Namespace, Service: r.in.Service}
	if a.Job != nil {
		r.jobs++
		measured.Job = flow.AnalysisJobName(r.in.Service, workflow.GetInfo(ctx).WorkflowExecution.RunID, r.jobs)
	}
	f := flow.StartMeasurement(ctx, a, measured, judge)
	if err := f.Get(ctx, &m); err != nil {
		m = activities.Measurement{Message: "not measured: " + err.Error()}
		if judge != nil {
			m.Phase = analysis.Inconclusive
		}
	}
	phase := m.Phase
	if judge == nil {
		phase = legacyJudge(a, &m)
	}
	if phase == "" {
		phase = analysis.Inconclusive
	}
	return phase, fmt.Sprintf("%s %s", m.Message, phase)
}

// startBackground runs the canary's background analysis, if it has one,
// beside its steps until they end: a failed verdict aborts the canary, an
// inconclusive one holds it before its next step for a human (promote
// goes on, abort returns to stable). What cannot be measured is never a
// failure.
func (r *rolloutRun) startBackground() {
	a, c := r.in.Background, r.canary
	if a == nil {
		return
	}
	if c.Background == nil {
		c.Background = &analysis.Tally{}
	}
	over := func() bool {
		return c.Step >= len(r.in.Steps) || c.Promoted || r.outcome != "" || c.BackgroundFailed != ""
	}
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		for !over() {
			if c.Background.Measured > 0 {
				if _, err := workflow.AwaitWithTimeout(ctx, a.IntervalDuration(), over); err != nil || over() {
					return
				}
			}
			phase, msg := r.measure(ctx, a)
			c.BackgroundLast = msg
			c.Background.Add(phase)
			switch {
			case c.Background.Failed > a.FailureLimit:
				c.BackgroundFailed = fmt.Sprintf("background analysis failed: %s (last: %s)", c.Background, msg)
				r.wakeUp()
				return
			case c.Background.Inconclusive > a.InconclusiveLimit && c.Held == "":
				c.Held = fmt.Sprintf("background analysis inconclusive: %s (last: %s); promote to go on, abort to return to stable", c.Background, msg)
			}
		}
	})
}
