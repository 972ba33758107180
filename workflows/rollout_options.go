package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// kubeCtx is for short, idempotent Kubernetes API calls, run as local
// activities: a whole sync (read, decide, scale, read) then costs one
// workflow task instead of a server round trip per call, which keeps the
// engine as quick as the in-cluster controller. They are retried for a day
// (an API server outage stalls the rollout, it does not fail it); summary
// shows in the UI, e.g. "scale web-5d8f9 3→6".
func (r *rolloutRun) kubeCtx(summary string) workflow.Context { return kubeCall(r.ctx, summary) }

// waitCtx is for a watch-based wait of up to timeout.
func (r *rolloutRun) waitCtx(ctx workflow.Context, timeout time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout + time.Minute,
		HeartbeatTimeout:    waitHeartbeatTimeout,
		RetryPolicy:         kubeRetry,
		Summary:             "wait for " + r.in.Service + " to change",
	})
}

// quickWaitCall is the rollout's quick wait: one try, in the workflow
// task that applied the plan (the activity wait follows if it fails).
func quickWaitCall(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: quickWaitFor + 30*time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:             summary,
	})
}
