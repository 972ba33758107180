package flow_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/worker/testenv"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// receiverRace is the lease workflow's shape where a signal was lost: a
// receiver blocked in Receive, and a run that wakes from a timer and ends
// at once, draining its signals first. It returns whether the signal was
// taken.
func receiverRace(ctx workflow.Context) (bool, error) {
	taken := false
	signals := workflow.GetSignalChannel(ctx, "redeploy")
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			signals.Receive(ctx, nil)
			taken = true
		}
	})
	_ = workflow.Sleep(ctx, 2*time.Second)
	flow.LetReceiversRun(ctx)
	for signals.ReceiveAsync(nil) { // the drain before a continue-as-new
		taken = true
	}
	return taken, nil
}

// A signal that arrives in the workflow task in which a run ends is taken,
// on a real Temporal server: the run's worker is stopped while its timer
// runs, the signal sent and the timer left to fire, so the next worker's
// task holds both. Without LetReceiversRun the receiver was handed the
// signal but never ran before the run ended, and the drain found nothing
// (the lease's workflow lost a schedule's restart so, as it continued as
// new after a deploy; TestScheduledRestartGoesThroughTheLeaseWorkflow).
func TestASignalArrivingAsTheRunEndsIsTaken(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	tq := testenv.Name(t, "tq")
	start := func() worker.Worker {
		w := worker.New(env.Temporal, tq, worker.Options{WorkerStopTimeout: time.Second})
		w.RegisterWorkflow(receiverRace)
		require.NoError(t, w.Start())
		return w
	}
	first := start()
	run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.Name(t, "race"), TaskQueue: tq}, receiverRace)
	require.NoError(t, err)
	waitFor := func(event enumspb.EventType) {
		testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "no "+event.String(), func() (bool, string) {
			it := env.Temporal.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				e, err := it.Next()
				if err != nil {
					return false, err.Error()
				}
				if e.GetEventType() == event {
					return true, ""
				}
			}
			return false, "not yet"
		})
	}
	waitFor(enumspb.EVENT_TYPE_TIMER_STARTED)
	first.Stop()
	require.NoError(t, env.Temporal.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), "redeploy", nil))
	waitFor(enumspb.EVENT_TYPE_TIMER_FIRED)
	t.Cleanup(start().Stop)
	var taken bool
	require.NoError(t, run.Get(ctx, &taken))
	require.True(t, taken, "the signal that arrived with the timer was taken")
}
