package workflows_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Issue 20.8: a canary paused for a human with a background analysis every
// second continues as new inside its pause, carrying its step and the
// analysis's tally, so no run's history outgrows its budget. Before, waits
// and gates never continued as new: such a canary reached Temporal's
// 51,200-event hard limit in about a day and the server terminated it.
// Here the budget is 60 events (a lease's rollouts use 4,000), so the
// hand-over happens within seconds.
func TestAPausedCanaryWithABackgroundAnalysisContinuesAsNewInsideItsPause(t *testing.T) {
	rt := newRolloutTest(t)
	ctx := context.Background()
	rt.complete(version("nginx:1.26", 4, "", false))
	limit := 60
	steps := []manifest.CanaryStep{weight(50), pause("")}
	in := api.RolloutInput{Namespace: rt.ns, Service: "web", Deployment: version("nginx:1.27", 4, "", false), Steps: steps,
		Background:       &manifest.Analysis{Prometheus: &manifest.PrometheusQuery{Query: "vector(1)"}, SuccessCondition: "result == 1", Interval: "1s", Count: 1000},
		MaxHistoryEvents: limit}
	run := startRollout(t, rt.env, rt.tq, in)
	id := run.GetID()

	runs := func() []string {
		var ids []string
		list, err := rt.env.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q", id)})
		require.NoError(t, err)
		for _, e := range list.GetExecutions() {
			ids = append(ids, e.GetExecution().GetRunId())
		}
		return ids
	}
	require.Eventually(t, func() bool { return len(runs()) >= 4 }, 90*time.Second, time.Second,
		"the paused canary never continued as new (%d runs)", len(runs()))

	// Every run within its budget (one measurement's events past it, at
	// most), the measurements going on across the runs.
	dc := converter.GetDefaultDataConverter()
	measured := 0
	// Workflow-task events are not counted: how many tasks a run takes is
	// the server's and the machine's timing (with the rest of the suite
	// beside it, a run's tasks timed out and were retried: 80 events in all,
	// CI), not the rollout's doing.
	for _, runID := range runs() {
		events := 0
		it := rt.env.Temporal.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if !strings.HasPrefix(ev.GetEventType().String(), "WorkflowTask") {
				events++
			}
			if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "LocalActivity" {
				var data struct{ ActivityType string }
				require.NoError(t, dc.FromPayloads(m.GetDetails()["data"], &data))
				if data.ActivityType == "MeasurePrometheus" {
					measured++
				}
			}
		}
		assert.LessOrEqual(t, events, limit+15, "run %s outgrew its budget (events besides workflow tasks)", runID)
	}
	assert.Greater(t, measured, limit/4, "the background analysis went on across the runs")

	// Still paused at step 2, until promoted; then the rollout ends.
	v, err := rt.env.Patient().QueryWorkflow(ctx, id, "", api.QueryStatus)
	require.NoError(t, err)
	var st api.RolloutStatus
	require.NoError(t, v.Get(&st))
	require.NotNil(t, st.Canary)
	assert.Equal(t, 2, st.Canary.Step, st.Canary.Summary)
	require.NoError(t, rt.env.Update(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: api.UpdatePromote,
		Args: []any{api.PromoteRequest{}}, WaitForStage: client.WorkflowUpdateStageCompleted}, nil))
	var res api.RolloutResult
	require.NoError(t, rt.env.Temporal.GetWorkflow(ctx, id, "").Get(ctx, &res))
	assert.Equal(t, api.OutcomeComplete, res.Outcome)
	assert.Equal(t, int32(4), res.AvailableReplicas)
}

// Issue 20.6 on the real stack: a background analysis Job still running
// when its canary is aborted is deleted once the rollout has ended (the
// check's next heartbeat finds its workflow closed and cancels it), rather
// than running on to its activeDeadlineSeconds. Before, it ran on.
func TestAnAbortedCanarysRunningAnalysisJobIsDeleted(t *testing.T) {
	rt := newRolloutTest(t)
	ctx := context.Background()
	rt.complete(version("nginx:1.26", 2, "", false))
	in := api.RolloutInput{Namespace: rt.ns, Service: "web", Deployment: version("nginx:1.27", 2, "", false),
		Steps: []manifest.CanaryStep{weight(50), pause("")},
		// A smoke test that never ends (no exit-code knob): it runs until aborted.
		Background: &manifest.Analysis{Job: &manifest.JobCheck{Image: "busybox:1.36"}, Interval: "1s"}}
	run := startRollout(t, rt.env, rt.tq, in)
	var job string
	require.Eventually(t, func() bool {
		list, err := rt.env.Kube.BatchV1().Jobs(rt.ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false
		}
		job = list.Items[0].Name
		return true
	}, 3*time.Minute, 200*time.Millisecond, "the background analysis never started its Job")

	require.NoError(t, rt.env.Update(ctx, client.UpdateWorkflowOptions{WorkflowID: run.GetID(), UpdateName: api.UpdateAbort,
		WaitForStage: client.WorkflowUpdateStageCompleted}, nil))
	err := rt.env.Temporal.GetWorkflow(ctx, run.GetID(), "").Get(ctx, nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, "RolloutAborted", appErr.Type())
	require.Eventually(t, func() bool {
		j, err := rt.env.Kube.BatchV1().Jobs(rt.ns).Get(ctx, job, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && j.DeletionTimestamp != nil)
	}, 90*time.Second, time.Second, "the aborted canary's Job %s runs on", job)
}
