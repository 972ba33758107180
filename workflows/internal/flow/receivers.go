package flow

import "go.temporal.io/sdk/workflow"

// LetReceiversRun lets every other coroutine of the run that can go on run
// before the caller does: a signal receiver (a workflow.Go blocked in
// Receive) that was handed a signal in this workflow task runs and takes
// it. Call it before a run ends (continue-as-new, completion).
//
// Why: a signal that arrives while a receiver is blocked in Receive is
// handed straight to it, out of the channel's buffer, so a ReceiveAsync
// drain no longer sees it; the receiver runs only once the run's main
// coroutine blocks. A run that woke in the same task (a timer fired) and
// ended without blocking ended before its receiver ran, and the signal was
// lost: a schedule's restart, sent to a lease's workflow as it continued
// as new after a deploy, never ran (TestScheduledRestartGoesThroughTheLeaseWorkflow,
// twice in 34 CI runs). It records no command: a replay is unchanged.
func LetReceiversRun(ctx workflow.Context) {
	ran := false
	workflow.Go(ctx, func(workflow.Context) { ran = true })
	_ = workflow.Await(ctx, func() bool { return ran })
}
