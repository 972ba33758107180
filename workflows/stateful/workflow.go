// Package stateful is a stateful service's rollout (issue 39.2): its
// StatefulSet rolled out through the partition, one durable step at a
// time. The StatefulSet controller replaces the pods; the workflow decides
// when, with k8s/statefulset's pure arithmetic, and every call to the
// cluster is an activity (activities/statefulsets.go).
package stateful

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// StatefulSetRolloutWorkflow rolls one stateful service out: its
// StatefulSet applied with the partition holding every pod at the running
// revision, then the partition lowered from the highest ordinal down, each
// step waiting until the pods it released run the new revision and are
// available (minReadySeconds), as upstream's RollingUpdate would replace
// them; a canary's setWeight steps stop at a partition short of zero, its
// pauses wait. A step without progress for progressDeadlineSeconds fails
// the rollout (ProgressDeadlineExceeded), after returning the released
// ordinals to the previous revision with autoRollback; an operator's abort
// returns them the same way. No step deletes a claim: the StatefulSet
// retains them (manifest.StatefulSet), and a pod replaced keeps its own.
//
// Operators steer it with updates (pause, resume, promote, abort) and read
// it with the "status" query, under the service's rollout ID.
func StatefulSetRolloutWorkflow(ctx workflow.Context, in api.StatefulSetRolloutInput) (*api.RolloutResult, error) {
	if bad := in.Invalid(); bad != nil {
		return nil, temporal.NewNonRetryableApplicationError(bad.Error(), api.ErrInvalidInput, nil)
	}
	carry, err := decodeCarry(in)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidInput, nil)
	}
	r := newRun(ctx, in, carry)
	if err := flow.RefuseGuarded(r.guard(flow.Continued(ctx))); err != nil {
		return nil, err
	}
	if err := r.registerControls(); err != nil {
		return nil, err
	}
	workflow.GetLogger(ctx).Info("stateful rollout started", "namespace", in.Namespace, "service", in.Service)

	// 1. The StatefulSet, a new template held at the partition of its
	// replicas; the revision its pods run is the one to return to (a
	// lease's own return has none: it is the way back). A continued run
	// has done it, and only reads.
	if carry == nil {
		if err := r.apply(); err != nil {
			return nil, err
		}
		if !in.Revert {
			r.Stable, r.StableHash = r.state.CurrentRevision, r.state.ReplacedTemplateHash
		}
	} else if err := r.read(); err != nil {
		return nil, err
	}

	// 2. A canary's steps: each weight a partition, each pause a wait.
	// 3. Then down to partition 0: every ordinal on the new revision.
	for {
		err := r.runSteps()
		switch {
		case err == errContinueAsNew:
			r.settle()
			return nil, workflow.NewContinueAsNewError(ctx, api.StatefulSetRolloutWorkflow, r.carryOver())
		case err == errAbort || err == errDeadline:
			if r.Outcome != "" || !r.canReturn() || err == errDeadline && !in.AutoRollback {
				r.settle()
				return r.finish(err)
			}
			// 4. Back: the previous revision's template written again, and
			// the same steps return the released ordinals to it.
			if err := r.returnToStable(err); err != nil {
				return nil, err
			}
			continue
		case err != nil:
			return nil, err
		}
		r.settle()
		return r.finish(nil)
	}
}

// finish reports how the rollout ended: complete, or the typed failure of
// one that returned to (or could not leave) the previous revision.
func (r *run) finish(stopped error) (*api.RolloutResult, error) {
	res := r.result()
	switch {
	case r.Outcome == api.OutcomeAborted || stopped == errAbort:
		res.Outcome = api.OutcomeAborted
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: rollout aborted%s; %s", r.in.Service, r.why(), r.where(stopped)), api.ErrRolloutAborted, nil, res)
	case r.Outcome == api.OutcomeRolledBack || stopped == errDeadline:
		res.Outcome = r.Outcome
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: no progress within %ds%s; %s", r.in.Service, r.deadlineSeconds(), r.why(), r.where(stopped)),
			api.ErrProgressDeadlineExceeded, nil, res)
	}
	res.Outcome = api.OutcomeComplete
	return res, nil
}

// why is why the rollout stopped (a failed analysis), or what its last
// step waited for, if anything.
func (r *run) why() string {
	switch {
	case r.Reason != "":
		return ": " + r.Reason
	case r.step.Waiting == "":
		return ""
	}
	return " (waiting for " + r.step.Waiting + ")"
}

// where says which revision the pods run at the end.
func (r *run) where(stopped error) string {
	left := fmt.Sprintf("partition %d, %d of %d ordinals on revision %s; every claim is kept",
		r.state.Partition, r.step.Updated, r.state.Replicas, r.state.UpdateRevision)
	switch {
	case r.Outcome != "" && r.step.Reached && r.target == 0:
		return fmt.Sprintf("every ordinal runs revision %s again, each with its claims", r.Stable)
	case r.Outcome != "":
		return fmt.Sprintf("the return to revision %s did not finish: %s", r.Stable, left)
	case r.in.Revert:
		return "the return to the last-known-good template did not finish: " + left
	case r.Stable == "":
		return fmt.Sprintf("nothing to return to (no earlier revision): the pods stay as they are, partition %d", r.state.Partition)
	case stopped == errDeadline && !r.in.AutoRollback:
		return fmt.Sprintf("autoRollback is off: the pods stay as they are (%s)", left)
	}
	return "the pods stay as they are: " + left
}
