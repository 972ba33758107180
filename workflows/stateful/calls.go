package stateful

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// Where a stateful rollout touches the cluster: one activity each, safe
// to retry (activities/statefulsets.go). The decisions are in steps.go
// (k8s/statefulset's Next and ForcedRollback).

// apply writes the StatefulSet, a new template held at the partition of
// its replicas, and reads it.
func (r *run) apply() error {
	var a *activities.Activities
	var st activities.StatefulSetState
	if err := workflow.ExecuteLocalActivity(flow.KubeSteps(r.ctx, "apply statefulset "+r.in.Service), a.ApplyStatefulSet,
		activities.ApplyStatefulSetInput{StatefulSet: r.in.StatefulSet}).Get(r.ctx, &st); err != nil {
		return err
	}
	r.state = &st
	return nil
}

// read refreshes the StatefulSet's state.
func (r *run) read() error {
	var a *activities.Activities
	var st activities.StatefulSetState
	if err := workflow.ExecuteLocalActivity(flow.KubeSteps(r.ctx, "read statefulset "+r.in.Service), a.ReadStatefulSet, r.ref).Get(r.ctx, &st); err != nil {
		return err
	}
	r.state = &st
	return nil
}

// setPartition writes the partition a step decided, then reads.
func (r *run) setPartition(p int32) error {
	var a *activities.Activities
	if err := workflow.ExecuteLocalActivity(flow.KubeCall(r.ctx, fmt.Sprintf("partition %s %d→%d", r.in.Service, r.state.Partition, p)), a.SetPartition,
		activities.SetPartitionInput{StatefulSetRef: r.ref, Partition: p}).Get(r.ctx, nil); err != nil {
		return err
	}
	return r.read()
}

// deleteStuck deletes the pods a return would otherwise wait on, then reads.
func (r *run) deleteStuck(ordinals []int32) error {
	var a *activities.Activities
	if err := workflow.ExecuteLocalActivity(flow.KubeCall(r.ctx, fmt.Sprintf("delete %s's pods %v that never turned Ready", r.in.Service, ordinals)), a.DeleteStuckPods,
		activities.DeleteStuckPodsInput{StatefulSetRef: r.ref, Revision: r.state.UpdateRevision, Ordinals: ordinals}).Get(r.ctx, nil); err != nil {
		return err
	}
	return r.read()
}

// revert writes the previous revision's template back.
func (r *run) revert() error {
	var a *activities.Activities
	var st activities.StatefulSetState
	if err := workflow.ExecuteLocalActivity(flow.KubeSteps(r.ctx, "write revision "+r.Stable+" back onto "+r.in.Service), a.RevertStatefulSet,
		activities.RevertStatefulSetInput{StatefulSetRef: r.ref, Revision: r.Stable, TemplateHash: r.StableHash}).Get(r.ctx, &st); err != nil {
		return err
	}
	r.state = &st
	return nil
}

// waitForStep waits until the step's decision would change, at most
// timeout. A control (pause, abort) interrupts it. In a return, with
// endOnForced, pods for the forced rollback end it too (not right after
// its deletes: a pod that keeps coming back never Ready waits its turn).
func (r *run) waitForStep(timeout time.Duration, endOnForced bool) error {
	waitCtx, cancel := workflow.WithCancel(r.ctx)
	r.wake = cancel
	defer func() { r.wake = nil }()
	in := activities.WaitStatefulSetStepInput{StatefulSetRef: r.ref, Target: r.target, MaxUnavailable: r.maxUnavailable(),
		Last: r.step, Partition: r.state.Partition, Timeout: timeout, Stale: r.state.Stale}
	in.Revert = r.Reverting && endOnForced && !r.state.Stale
	var a *activities.Activities
	var st activities.StatefulSetState
	err := workflow.ExecuteActivity(flow.WaitCall(waitCtx, timeout, "wait for "+r.in.Service+": "+r.step.Waiting), a.WaitStatefulSetStep, in).Get(r.ctx, &st)
	if temporal.IsCanceledError(err) {
		if r.ctx.Err() != nil {
			return err // the rollout itself is cancelled (superseded, torn down)
		}
		return nil // a control: decide again
	}
	if err != nil {
		return err
	}
	r.state = &st
	return nil
}
