package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// kubeRetry retries Kubernetes API calls without limit, with backoff: an
// unreachable API server delays a rollout, it never fails it. Only
// non-retryable application errors (typed) end an activity.
var kubeRetry = &temporal.RetryPolicy{
	InitialInterval:    500 * time.Millisecond,
	BackoffCoefficient: 2,
	MaximumInterval:    15 * time.Second,
}

// kubeCtx is for short, idempotent Kubernetes API calls, run as local
// activities: a whole sync (read, decide, scale, read) then costs one
// workflow task instead of a server round trip per call, which keeps the
// engine as quick as the in-cluster controller. They are retried for a day
// (an API server outage stalls the rollout, it does not fail it); summary
// shows in the UI, e.g. "scale web-5d8f9 3→6".
func (r *rolloutRun) kubeCtx(summary string) workflow.Context { return kubeCall(r.ctx, summary) }

// kubeCall is the local-activity options of every short Kubernetes call,
// the rollout's and the deploy chain's.
func kubeCall(ctx workflow.Context, summary string) workflow.Context {
	return kubeLocal(ctx, summary, kubeCallTimeout)
}

// kubeCallTimeout bounds one attempt of one Kubernetes call (a variable for
// the tests).
var kubeCallTimeout = 30 * time.Second

// kubeSteps is the local-activity options of a batched step (several
// Kubernetes calls in one: PrepareDeploy, ApplyDeploy, FinishDeploy,
// PrepareRollout, ApplyPlan). Under load (a fleet of deploys sharing the
// worker's rate limit) one call's 30s budget for the whole step timed out
// every attempt, and the retries, redoing the step, never finished.
func kubeSteps(ctx workflow.Context, summary string) workflow.Context {
	return kubeLocal(ctx, summary, batchedStepTimeout)
}

// kubeLocal is a Kubernetes local activity's options: retried for a day,
// each attempt bounded by timeout.
func kubeLocal(ctx workflow.Context, summary string, timeout time.Duration) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    timeout,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy:            kubeRetry,
		Summary:                summary,
	})
}

// batchedStepTimeout bounds one attempt of a batched step (a variable for
// the tests).
var batchedStepTimeout = 5 * time.Minute

// waitHeartbeatTimeout notices a dead worker: the wait is retried elsewhere
// within this long. The watch heartbeats every few seconds.
const waitHeartbeatTimeout = 15 * time.Second

// waitCtx is for a watch-based wait of up to timeout.
func (r *rolloutRun) waitCtx(ctx workflow.Context, timeout time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout + time.Minute,
		HeartbeatTimeout:    waitHeartbeatTimeout,
		RetryPolicy:         kubeRetry,
		Summary:             "wait for " + r.in.Service + " to change",
	})
}
