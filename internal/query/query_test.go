package query_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/worker/testenv"
)

// taskTime is how long the busy workflow's task runs: longer than the
// SDK's 10s bound on a query, as a busy lease's tasks were on CI's loaded
// PostgreSQL server.
const taskTime = 13 * time.Second

func slowStep(ctx context.Context) error {
	select {
	case <-time.After(taskTime):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// busy answers "state"; signalled "go", it runs one workflow task of
// taskTime (a local activity), then waits.
func busy(ctx workflow.Context) error {
	state := "started"
	if err := workflow.SetQueryHandler(ctx, "state", func() (string, error) { return state, nil }); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteLocalActivity(lctx, slowStep).Get(ctx, nil); err != nil {
		return err
	}
	state = "stepped"
	return workflow.Sleep(ctx, time.Hour)
}

// Guards the CLI's and the tests' status queries of a busy workflow: a
// query that arrives while the workflow's task runs is answered when that
// task ends. The SDK's QueryWorkflow gives up after 10s whatever its
// context allows, so a workflow whose tasks take longer could never be
// asked (CI failed the soak and a paused canary's test on it, every
// attempt for a minute). The patient client waits, and its answer
// includes what the task did.
func TestAQueryWaitsForAWorkflowTaskLongerThanTenSeconds(t *testing.T) {
	env := testenv.Get(t)
	tq := testenv.Name(t, "tq")
	w := worker.New(env.Temporal, tq, worker.Options{})
	w.RegisterWorkflowWithOptions(busy, workflow.RegisterOptions{Name: "Busy"})
	w.RegisterActivity(slowStep)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx := context.Background()
	ask := func(c client.Client, id string) (string, error) {
		v, err := c.QueryWorkflow(ctx, id, "", "state")
		if err != nil {
			return "", err
		}
		var s string
		return s, v.Get(&s)
	}
	start := func() string {
		id := testenv.Name(t, "busy")
		run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq,
			WorkflowTaskTimeout: time.Minute}, "Busy") // no task heartbeat within taskTime
		require.NoError(t, err)
		t.Cleanup(func() { _ = env.Temporal.TerminateWorkflow(ctx, id, "", "test over") })
		// The first task answered, then the slow one under way.
		testenv.Eventually(t, 2*time.Minute, 100*time.Millisecond, "the busy workflow never started", func() (bool, string) {
			s, err := ask(env.Patient(), run.GetID())
			return err == nil && s == "started", s
		})
		require.NoError(t, env.Temporal.SignalWorkflow(ctx, id, "", "go", nil))
		time.Sleep(time.Second)
		return id
	}

	// The SDK's own query: the 10s bound.
	id := start()
	_, err := ask(env.Temporal, id)
	var deadline *serviceerror.DeadlineExceeded
	require.True(t, errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded),
		"the SDK's query did not time out in a task of %s (%v): is internal/query still needed?", taskTime, err)

	// The patient one: answered once the task ended.
	id = start()
	began := time.Now()
	s, err := ask(env.Patient(), id)
	require.NoError(t, err)
	assert.Equal(t, "stepped", s)
	assert.Greater(t, time.Since(began), 10*time.Second, "answered with the task's end")
}
