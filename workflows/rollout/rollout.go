// Package workflows holds deployflow's Temporal workflows. They read top to
// bottom as the deploy story; every call to the outside world is an activity
// (package activities) and every decision is pure (package k8s/rollout).
package rollout

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/k8s/rollout"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// RolloutWorkflow rolls one service's desired Deployment out onto the
// cluster exactly as the Kubernetes Deployment controller would, one sync at
// a time: read the service's ReplicaSets, decide (pure, k8s/rollout.Sync),
// apply the decided operations (idempotent activities), wait for the next
// change (a heartbeating watch), and again, until the rollout is complete.
//
// Operators steer it with updates (pause, resume, scale, undo, restart,
// abort) and read it with the "status" query. Past the progress deadline it
// fails with ProgressDeadlineExceeded, after restoring the last-known-good
// revision when autoRollback is set.
func RolloutWorkflow(ctx workflow.Context, start api.RolloutInput) (*api.RolloutResult, error) {
	if bad := start.Invalid(); bad != nil {
		return nil, temporal.NewNonRetryableApplicationError(bad.Error(), api.ErrInvalidInput, nil)
	}
	in, err := decodeRolloutInput(start)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidInput, nil)
	}
	if err := flow.RefuseGuarded(in.guard(flow.Continued(ctx), workflow.GetInfo(ctx).ParentWorkflowExecution != nil)); err != nil {
		return nil, err
	}
	d, err := in.desired()
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidInput, nil)
	}
	r := newRolloutRun(ctx, in, d)
	r.Behaviour = flow.NewBehaviour(ctx, in.FewerEvents, false)
	if err := r.registerControls(); err != nil {
		return nil, err
	}
	workflow.GetLogger(ctx).Info("rollout started", "namespace", in.Namespace, "service", in.Service)

	// 1. The namespace, usable for pods, the desired Deployment as the API
	// server defaults it, and 2. what runs now (a continued run only reads).
	if err := r.prepare(); err != nil {
		return nil, err
	}
	// Which revision is the last-known-good one.
	if in.Carry == nil {
		r.stableRevision = stableRevision(r.state.ReplicaSets)
		if r.isCanary() {
			r.canary = &CanaryState{}
		}
		if in.BlueGreen != nil {
			if err := r.startBlueGreen(); err != nil {
				return nil, err
			}
		}
	}

	// 3. A canary's steps first.
	if r.canary != nil {
		continueAsNew, err := r.runCanary()
		if err != nil {
			return nil, err
		}
		if continueAsNew {
			r.settleControls()
			return nil, workflow.NewContinueAsNewError(ctx, RolloutWorkflow, r.carryOver())
		}
		// Through a Gateway: every request to the version the syncs keep.
		if err := r.trafficAfterSteps(); err != nil {
			return nil, err
		}
	}

	// 3'. A blue-green's steps, to the switch and the scale-down delay.
	if r.blueGreen != nil {
		continueAsNew, err := r.runBlueGreen()
		if err != nil {
			return nil, err
		}
		if continueAsNew {
			r.settleControls()
			return nil, workflow.NewContinueAsNewError(ctx, RolloutWorkflow, r.carryOver())
		}
	}

	// Through a Gateway, a rollout without steps (a first deploy, a
	// return to the last-known-good) routes to every pod of the service,
	// as its Service does.
	if r.canary == nil && r.in.BlueGreen == nil && r.routesTraffic() {
		if err := r.trafficToEveryPod(); err != nil {
			return nil, err
		}
	}

	// 4. Sync until the rollout is complete, as the controller would.
	for {
		if r.shouldContinueAsNew() {
			r.settleControls()
			return nil, workflow.NewContinueAsNewError(ctx, RolloutWorkflow, r.carryOver())
		}
		plan, err := r.sync()
		if err != nil {
			return nil, err
		}
		if plan.Step == rollout.StepHashCollision {
			if err := r.collided(); err != nil {
				return nil, err
			}
			continue // the collision count moved on: decide again with a new name
		}
		if !plan.Empty() {
			if err := r.apply(plan); err != nil {
				return nil, err
			}
			continue
		}
		if r.statusChanged(plan) {
			continue // upstream re-syncs on its own status write
		}
		if r.timedOut() {
			if r.rollsBackAtDeadline() {
				r.rollBackToStable(api.OutcomeRolledBack)
				continue
			}
			r.settleControls()
			return nil, r.deadlineExceeded()
		}
		if r.complete() {
			if err := r.pinRolledOut(); err != nil {
				return nil, err
			}
			if err := r.trafficRolledOut(); err != nil {
				return nil, err
			}
			r.settleControls()
			return r.finish()
		}
		if err := r.waitForChange(plan.RequeueAfter); err != nil {
			return nil, err
		}
	}
}

// finish reports a complete rollout: success, or the typed failure of a
// rollout that ended on the stable revision instead of the desired one.
func (r *rolloutRun) finish() (*api.RolloutResult, error) {
	res := r.result()
	switch r.outcome {
	case api.OutcomeRolledBack:
		why := fmt.Sprintf("no progress within %ds", *r.d.Spec.ProgressDeadlineSeconds)
		switch {
		case r.canary != nil && r.canary.Reason != "":
			why = "canary " + r.canary.Reason
		case r.blueGreen != nil && r.blueGreen.Reason != "":
			why = "blue-green " + r.blueGreen.Reason
		}
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: %s; rolled back to revision %d, which is fully available again",
				r.in.Service, why, r.stableRevision),
			api.ErrProgressDeadlineExceeded, nil, res)
	case api.OutcomeAborted:
		why := "rollout aborted"
		switch {
		case r.canary != nil && r.canary.Reason != "":
			why = "canary aborted: " + r.canary.Reason
		case r.blueGreen != nil && r.blueGreen.Reason != "":
			why = "blue-green aborted: " + r.blueGreen.Reason
		}
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: %s; revision %d is fully available again", r.in.Service, why, r.stableRevision),
			api.ErrRolloutAborted, nil, res)
	}
	res.Outcome = api.OutcomeComplete
	return res, nil
}

// deadlineExceeded is the failure of a rollout that made no progress within
// its deadline. After a rollback or an abort, that is the return to the
// stable revision, and the message says so: the failed revision is gone,
// and what did not come up in time is the stable one.
func (r *rolloutRun) deadlineExceeded() error {
	cond := rollout.GetDeploymentCondition(r.d.Status, "Progressing")
	msg := fmt.Sprintf("%s: no progress within %ds", r.in.Service, *r.d.Spec.ProgressDeadlineSeconds)
	switch r.outcome {
	case api.OutcomeRolledBack:
		msg = fmt.Sprintf("%s: rolled back to revision %d, which made no progress within %ds (%d of %d available)",
			r.in.Service, r.stableRevision, *r.d.Spec.ProgressDeadlineSeconds, r.d.Status.AvailableReplicas, *r.d.Spec.Replicas)
	case api.OutcomeAborted:
		msg = fmt.Sprintf("%s: aborted; revision %d, going back, made no progress within %ds (%d of %d available)",
			r.in.Service, r.stableRevision, *r.d.Spec.ProgressDeadlineSeconds, r.d.Status.AvailableReplicas, *r.d.Spec.Replicas)
	}
	if cond != nil && cond.Message != "" {
		msg += ": " + cond.Message
	}
	return temporal.NewNonRetryableApplicationError(msg, api.ErrProgressDeadlineExceeded, nil, r.result())
}
