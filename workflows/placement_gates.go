package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
)

// A placement's wave gates (issue 23.3): once a wave is healthy in every
// cluster, its pause, then its analysis, then its approval; the next wave
// starts when all passed. An abort ends any of them.

var errAborted = errors.New("aborted by an operator")

// passGate is wave i's gate: it returns once all of it passed.
func (p *placementRun) passGate(i int) error {
	w := p.in.Manifest.Placement.Waves[i]
	if err := p.pause(i, w.PauseDuration()); err != nil {
		return err
	}
	if w.Analysis != nil {
		if err := p.analyse(i, w.Analysis); err != nil {
			return err
		}
	}
	if w.Approval {
		return p.approve(i)
	}
	return nil
}

// pause holds the next wave back for d.
func (p *placementRun) pause(i int, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	ws := &p.st.Waves[i]
	ws.Phase, ws.Gate = WaveGate, "pause "+d.String()
	p.mark(plan.OpPause, waveTarget(i), plan.Running, nil)
	defer func() {
		if n := p.st.Tree.Search(plan.OpPause, waveTarget(i)); n != nil && n.State == plan.Running && !p.abort {
			n.Mark(plan.Done, nil)
		}
	}()
	if _, err := workflow.AwaitWithTimeout(p.ctx, d, func() bool { return p.abort }); err != nil {
		return err
	}
	if p.abort {
		return errAborted
	}
	return nil
}

// analyse takes a's measurements, interval apart, until its verdict is in.
// Inconclusive holds the wave for a human (promote or abort), never reads
// as a failure.
func (p *placementRun) analyse(i int, a *manifest.Analysis) error {
	ws := &p.st.Waves[i]
	ws.Phase = WaveGate
	p.mark(plan.OpPause, waveTarget(i), plan.Done, nil)
	p.mark(plan.OpAnalysis, waveTarget(i), plan.Running, nil)
	var t analysis.Tally
	for analysis.Verdict(a, t) == analysis.Running {
		if t.Measured > 0 {
			if _, err := workflow.AwaitWithTimeout(p.ctx, a.IntervalDuration(), func() bool { return p.abort }); err != nil {
				return err
			}
			if p.abort {
				return errAborted
			}
		}
		phase, msg := p.measure(a)
		t.Add(phase)
		ws.Gate = fmt.Sprintf("analysis %s: %s", a.Prometheus.Query, msg)
	}
	switch analysis.Verdict(a, t) {
	case analysis.Successful:
		p.mark(plan.OpAnalysis, waveTarget(i), plan.Done, nil)
		return nil
	case analysis.Inconclusive:
		if err := p.hold(i); err != nil {
			return err
		}
		p.mark(plan.OpAnalysis, waveTarget(i), plan.Done, nil)
		return nil
	default:
		ws.Phase = WaveFailed
		p.mark(plan.OpAnalysis, waveTarget(i), plan.Failed, errors.New(ws.Gate))
		return fmt.Errorf("wave %d: analysis failed: %s", i+1, ws.Gate)
	}
}

// approve holds the wave until an operator promotes the placement
// (`deployflow promote <lease>`) or aborts it.
func (p *placementRun) approve(i int) error {
	p.st.Waves[i].Gate = "awaiting approval: deployflow promote " + p.in.Manifest.Lease
	p.mark(plan.OpApproval, waveTarget(i), plan.Running, nil)
	if err := p.hold(i); err != nil {
		p.mark(plan.OpApproval, waveTarget(i), plan.Failed, err)
		return err
	}
	p.mark(plan.OpApproval, waveTarget(i), plan.Done, nil)
	return nil
}

// hold waits, wave i Held, for a promote or an abort.
func (p *placementRun) hold(i int) error {
	p.st.Waves[i].Phase = WaveHeld
	if err := workflow.Await(p.ctx, func() bool { return p.promote || p.abort }); err != nil {
		return err
	}
	p.promote = false
	if p.abort {
		return errAborted
	}
	return nil
}

// measure is one measurement of a wave's analysis, judged by the activity.
func (p *placementRun) measure(a *manifest.Analysis) (analysis.Phase, string) {
	var act *activities.Activities
	var m activities.Measurement
	ctx := workflow.WithLocalActivityOptions(p.ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second, ScheduleToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	c := analysis.ConditionsOf(a)
	err := workflow.ExecuteLocalActivity(ctx, act.MeasurePrometheus, activities.MeasureInput{
		Query: a.Prometheus.Query, Namespace: manifest.Namespace(p.in.Manifest.Lease), Judge: &c}).Get(p.ctx, &m)
	if err != nil {
		return analysis.Inconclusive, "not measured: " + err.Error()
	}
	if m.Phase == "" {
		m.Phase = analysis.Inconclusive
	}
	return m.Phase, fmt.Sprintf("%s %s", m.Message, m.Phase)
}
