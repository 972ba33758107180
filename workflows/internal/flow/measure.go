package flow

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Where an analysis touches the world: one measurement of a canary's (or
// a blue-green's, or a stateful rollout's) analysis, an activity each.
// What it means is judged in internal/analysis.

// Measured names what an analysis measures: the service it judges, in its
// namespace, and the Job a Job analysis runs (AnalysisJobName).
type Measured struct {
	Namespace, Service, Job string
}

// StartMeasurement starts one measurement of a: a Job's run (an activity
// that heartbeats while the Job runs), an HTTP check or a Prometheus
// query (local activities). judge, if set, is applied where measured
// (the measurement's Phase); nil leaves the verdict to the caller.
func StartMeasurement(ctx workflow.Context, a *manifest.Analysis, m Measured, judge *analysis.Conditions) workflow.Future {
	var act *activities.Activities
	switch {
	case a.Job != nil:
		return workflow.ExecuteActivity(JobCall(ctx, a.Job, "job "+a.Job.Image), act.RunJob, activities.JobCheckInput{
			Namespace: m.Namespace, Service: m.Service, Name: m.Job, Job: *a.Job, Judge: judge})
	case a.HTTP != nil:
		return workflow.ExecuteLocalActivity(WithSummary(MeasureCall(ctx), "check "+a.HTTP.URL), act.MeasureHTTP,
			activities.HTTPCheckInput{Namespace: m.Namespace, URL: a.HTTP.URL, JSONField: a.HTTP.JSONField, Judge: judge})
	default:
		return workflow.ExecuteLocalActivity(WithSummary(MeasureCall(ctx), "measure "+a.Prometheus.Query), act.MeasurePrometheus,
			activities.MeasureInput{Query: a.Prometheus.Query, Namespace: m.Namespace, Judge: judge})
	}
}

// Measure takes one measurement of a, judged where measured, and returns
// its phase and what a status shows of it. What could not be measured is
// inconclusive, never a failure.
func Measure(ctx workflow.Context, a *manifest.Analysis, m Measured) (analysis.Phase, string) {
	judge := analysis.ConditionsOf(a)
	var got activities.Measurement
	if err := StartMeasurement(ctx, a, m, &judge).Get(ctx, &got); err != nil {
		got = activities.Measurement{Message: "not measured: " + err.Error(), Phase: analysis.Inconclusive}
	}
	if got.Phase == "" {
		got.Phase = analysis.Inconclusive
	}
	return got.Phase, fmt.Sprintf("%s %s", got.Message, got.Phase)
}
