package placement

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/workflows/internal/flow"
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
	ws.Phase, ws.Gate = api.WaveGate, "pause "+d.String()
	p.mark(plan.OpPause, plan.WaveTarget(i), plan.Running, nil)
	defer func() {
		if n := p.st.Tree.Search(plan.OpPause, plan.WaveTarget(i)); n != nil && n.State == plan.Running && !p.abort {
			flow.SetState(n, plan.Done, nil)
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
	ws.Phase = api.WaveGate
	p.mark(plan.OpPause, plan.WaveTarget(i), plan.Done, nil)
	p.mark(plan.OpAnalysis, plan.WaveTarget(i), plan.Running, nil)
	var t analysis.Tally
	verdict, err := flow.RunAnalysis(a, &t, flow.AnalysisRun{
		Wait: func(d time.Duration) (bool, error) {
			if _, err := workflow.AwaitWithTimeout(p.ctx, d, func() bool { return p.abort }); err != nil {
				return true, err
			}
			return p.abort, nil
		},
		Measure: func() (analysis.Phase, string) {
			if a.Job != nil {
				return p.runJobs(i, a)
			}
			return p.measure(a)
		},
		Report: func(msg string) { ws.Gate = fmt.Sprintf("analysis %s: %s", analysed(a), msg) },
	})
	switch {
	case err != nil:
		return err
	case verdict == analysis.Running: // stopped only by an abort
		return errAborted
	}
	switch verdict {
	case analysis.Successful:
		p.mark(plan.OpAnalysis, plan.WaveTarget(i), plan.Done, nil)
		return nil
	case analysis.Inconclusive:
		if err := p.hold(i); err != nil {
			return err
		}
		p.mark(plan.OpAnalysis, plan.WaveTarget(i), plan.Done, nil)
		return nil
	default:
		ws.Phase = api.WaveFailed
		p.mark(plan.OpAnalysis, plan.WaveTarget(i), plan.Failed, errors.New(ws.Gate))
		return fmt.Errorf("wave %d: analysis failed: %s", i+1, ws.Gate)
	}
}

// approve holds the wave until an operator promotes the placement
// (`deployflow promote <lease>`) or aborts it.
func (p *placementRun) approve(i int) error {
	p.st.Waves[i].Gate = "awaiting approval: deployflow promote " + p.in.Manifest.Lease
	p.mark(plan.OpApproval, plan.WaveTarget(i), plan.Running, nil)
	if err := p.hold(i); err != nil {
		p.mark(plan.OpApproval, plan.WaveTarget(i), plan.Failed, err)
		return err
	}
	p.mark(plan.OpApproval, plan.WaveTarget(i), plan.Done, nil)
	return nil
}

// hold waits, wave i Held, for a promote or an abort.
func (p *placementRun) hold(i int) error {
	p.st.Waves[i].Phase = api.WaveHeld
	if err := workflow.Await(p.ctx, func() bool { return p.promote || p.abort }); err != nil {
		return err
	}
	p.promote = false
	if p.abort {
		return errAborted
	}
	return nil
}

// analysed names what a wave's analysis measures.
func analysed(a *manifest.Analysis) string {
	if a.Job != nil {
		return "job " + a.Job.Image
	}
	return a.Prometheus.Query
}

// runJobs is one measurement of a wave's Job analysis: the Job runs in the
// lease's namespace of each cluster of wave i at once (by that cluster's
// activities, on its task queue), each run judged where it ran. The wave's
// verdict is the worst: one failure fails it; one that could not be
// measured (a cluster down) holds it for a human, never fails it.
func (p *placementRun) runJobs(i int, a *manifest.Analysis) (analysis.Phase, string) {
	var act *activities.Activities
	p.jobs++
	c := analysis.ConditionsOf(a)
	clusters := p.in.Manifest.Placement.Waves[i].Clusters
	futures := make([]workflow.Future, len(clusters))
	jobs, stop := workflow.WithCancel(p.ctx) // an abort stops them: each deletes its Job
	for j, cluster := range clusters {
		queue := workflow.GetInfo(p.ctx).TaskQueueName
		if cluster != p.self {
			queue = config.ClusterTaskQueue(queue, cluster)
		}
		ctx := flow.ClusterJobCall(jobs, a.Job, queue, "job "+a.Job.Image+" in cluster "+cluster)
		futures[j] = workflow.ExecuteActivity(ctx, act.RunJob, activities.JobCheckInput{
			Namespace: manifest.Namespace(p.in.Manifest.Lease), Service: "placement",
			Name: flow.AnalysisJobName("placement", fmt.Sprintf("%s/wave-%d", workflow.GetInfo(p.ctx).WorkflowExecution.RunID, i+1), p.jobs),
			Job:  *a.Job, Judge: &c,
		})
	}
	results := make([]activities.Measurement, len(clusters))
	done := 0
	for j, f := range futures {
		workflow.Go(p.ctx, func(gctx workflow.Context) {
			if err := f.Get(gctx, &results[j]); err != nil {
				results[j] = activities.Measurement{Phase: analysis.Inconclusive, Message: "not measured: " + flow.ErrorMessage(err)}
			}
			done++
		})
	}
	_ = workflow.Await(p.ctx, func() bool { return done == len(futures) || p.abort })
	if done < len(futures) {
		stop()
		_ = workflow.Await(p.ctx, func() bool { return done == len(futures) })
	}
	worst, msgs := analysis.Successful, make([]string, 0, len(clusters))
	for j, m := range results {
		if m.Phase == "" {
			m.Phase = analysis.Inconclusive
		}
		switch {
		case m.Phase == analysis.Failed:
			worst = analysis.Failed
		case m.Phase == analysis.Inconclusive && worst == analysis.Successful:
			worst = analysis.Inconclusive
		}
		msgs = append(msgs, fmt.Sprintf("cluster %s: %s %s", clusters[j], m.Message, m.Phase))
	}
	return worst, strings.Join(msgs, "; ")
}

// measure is one measurement of a wave's analysis, judged by the activity.
func (p *placementRun) measure(a *manifest.Analysis) (analysis.Phase, string) {
	var act *activities.Activities
	var m activities.Measurement
	ctx := flow.MeasureCall(p.ctx)
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
