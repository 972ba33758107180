package flow

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Every call's options, in one place (issue 36.5): how long each
// activity, local activity and child workflow may take, and how it is
// retried. TestCallOptionsLiveInOneFile keeps them here.

// KubeRetry retries Kubernetes API calls without limit, with backoff: an
// unreachable API server delays a rollout, it never fails it. Only
// non-retryable application errors (typed) end an activity.
var KubeRetry = &temporal.RetryPolicy{
	InitialInterval:    500 * time.Millisecond,
	BackoffCoefficient: 2,
	MaximumInterval:    15 * time.Second,
}

// KubeCall is the local-activity options of every short Kubernetes call,
// the rollout's and the deploy chain's.
func KubeCall(ctx workflow.Context, summary string) workflow.Context {
	return kubeLocal(ctx, summary, KubeCallTimeout)
}

// KubeCallTimeout bounds one attempt of one Kubernetes call (a variable for
// the tests).
var KubeCallTimeout = 30 * time.Second

// KubeSteps is the local-activity options of a batched step (several
// Kubernetes calls in one: PrepareDeploy, ApplyDeploy, FinishDeploy,
// PrepareRollout, ApplyPlan). Under load (a fleet of deploys sharing the
// worker's rate limit) one call's 30s budget for the whole step timed out
// every attempt, and the retries, redoing the step, never finished.
func KubeSteps(ctx workflow.Context, summary string) workflow.Context {
	return kubeLocal(ctx, summary, BatchedStepTimeout)
}

// kubeLocal is a Kubernetes local activity's options: retried for a day,
// each attempt bounded by timeout.
func kubeLocal(ctx workflow.Context, summary string, timeout time.Duration) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    timeout,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy:            KubeRetry,
		Summary:                summary,
	})
}

// BatchedStepTimeout bounds one attempt of a batched step (a variable for
// the tests).
var BatchedStepTimeout = 5 * time.Minute

// WaitHeartbeatTimeout notices a dead worker: the wait is retried elsewhere
// within this long. The watch heartbeats every few seconds.
const WaitHeartbeatTimeout = 15 * time.Second

// ProbeCall is for the health monitor's observations: a few quick tries,
// then the tick reports Unknown instead of waiting for the cluster.
func ProbeCall(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    5 * time.Second,
		ScheduleToCloseTimeout: 15 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
		Summary:                summary,
	})
}

// TeardownCall is for deleting a lease's namespace: an activity that
// heartbeats while the namespace's objects go, retried like every
// Kubernetes call.
func TeardownCall(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy:         KubeRetry,
		Summary:             summary,
	})
}

// PlanCall is for planning a deploy (deploy --plan): a minute or two of
// retries, then the caller is told.
func PlanCall(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 2 * time.Minute,
		RetryPolicy:            KubeRetry,
		Summary:                summary,
	})
}

// RolloutChild is a service's rollout, a child of its lease's workflow:
// cancelled with it, and waited for when cancelled.
func RolloutChild(ctx workflow.Context, id, summary string) workflow.Context {
	return workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          id,
		WaitForCancellation: true,
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		StaticSummary:       summary,
	})
}

// PinCall is for pinning a blue-green's Services to their versions.
func PinCall(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second, ScheduleToCloseTimeout: 5 * time.Minute, RetryPolicy: KubeRetry, Summary: summary,
	})
}

// TrafficCall is for setting a canary's route weights: each attempt
// waits for the Gateway to accept the routes (30s at most), retried like
// every Kubernetes call.
func TrafficCall(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 45 * time.Second, ScheduleToCloseTimeout: 10 * time.Minute, RetryPolicy: KubeRetry, Summary: summary,
	})
}

// NotifyCall is for the worker's webhook: a webhook that does not answer
// delays a canary by these retries at most, and never fails it.
func NotifyCall(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second, ScheduleToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5},
		Summary:     summary,
	})
}

// MeasureCall is one measurement of an analysis (a query, an HTTP check):
// a few tries, then it is inconclusive, never a failure. A rollout's and a
// placement wave's alike.
func MeasureCall(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second, ScheduleToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
}

// JobCall is an analysis's Job: it runs for up to its deadline, the
// activity heartbeating while it waits.
func JobCall(ctx workflow.Context, j *manifest.JobCheck, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, jobOptions(j, summary))
}

// ClusterJobCall is a placement wave's analysis Job in one cluster (its
// worker's task queue): an abort stops it, and is waited for (the Job is
// deleted).
func ClusterJobCall(ctx workflow.Context, j *manifest.JobCheck, queue, summary string) workflow.Context {
	o := jobOptions(j, summary)
	o.TaskQueue, o.WaitForCancellation = queue, true
	return workflow.WithActivityOptions(ctx, o)
}

// JobRetryFor is how long an analysis Job's run is tried again after its
// activity failed (the API server unreachable: the Job could not be
// created or read; the Job's own verdict is a result, never an error). It
// outlasts an API server's restart: with three attempts, 7 s apart at
// most, a 30 s outage (make chaos) left the measurement not taken, and a
// canary with the default inconclusiveLimit held for a human.
const JobRetryFor = 2 * time.Minute

func jobOptions(j *manifest.JobCheck, summary string) workflow.ActivityOptions {
	run := time.Duration(j.Deadline())*time.Second + 2*time.Minute
	return workflow.ActivityOptions{
		StartToCloseTimeout: run, HeartbeatTimeout: 30 * time.Second,
		ScheduleToCloseTimeout: run + JobRetryFor,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 15 * time.Second},
		Summary:                summary,
	}
}

// ClusterListCall is for listing the clusters the worker knows.
func ClusterListCall(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
}

// ClusterReadCall is for reading a cluster's lease workflow (what the
// cluster returns to if the placement fails).
func ClusterReadCall(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second}})
}

// ClusterDeployCall is a placement's deploy to one cluster: it takes as
// long as its rollout (a canary's pauses too); the activity heartbeats
// while it waits, and a cluster that is down is waited for (its lease
// workflow retries). An interrupted deploy has stopped before its cluster
// is returned: the return must not race a late send of the deploy.
func ClusterDeployCall(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 24 * time.Hour, HeartbeatTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{api.ErrClusterDeploy}},
		Summary:             summary,
		WaitForCancellation: true,
	})
}

// WithSummary is ctx's local-activity options with another summary.
func WithSummary(ctx workflow.Context, summary string) workflow.Context {
	o := workflow.GetLocalActivityOptions(ctx)
	o.Summary = summary
	return workflow.WithLocalActivityOptions(ctx, o)
}

// WaitCall is for a watch-based wait of up to timeout.
func WaitCall(ctx workflow.Context, timeout time.Duration, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout + time.Minute,
		HeartbeatTimeout:    WaitHeartbeatTimeout,
		RetryPolicy:         KubeRetry,
		Summary:             summary,
	})
}

// QuickWaitFor bounds a quick wait: the local activity holds the
// rollout's workflow task, so queries and operator controls of the rollout
// wait behind it, at most this long.
const QuickWaitFor = 2 * time.Second

// QuickWaitCall is the rollout's quick wait: one try, in the workflow
// task that applied the plan (the activity wait follows if it fails).
func QuickWaitCall(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: QuickWaitFor + 30*time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:             summary,
	})
}
