// Package workflows holds deployflow's Temporal workflows. They read top to
// bottom as the deploy story; every call to the outside world is an activity
// (package activities) and every decision is pure (package k8s/rollout).
package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// Error types of RolloutWorkflow's non-retryable failures.
const (
	ErrInvalidInput             = activities.ErrInvalidInput
	ErrProgressDeadlineExceeded = rollout.TimedOutReason
	ErrRolloutAborted           = "RolloutAborted"
)

// Outcomes of a finished rollout (RolloutResult.Outcome).
const (
	OutcomeComplete   = "Complete"   // the desired revision is fully available
	OutcomeAborted    = "Aborted"    // an operator aborted; the stable revision is back
	OutcomeRolledBack = "RolledBack" // the deadline passed; autoRollback restored the stable revision
)

// RolloutResult is what a finished rollout reports.
type RolloutResult struct {
	Namespace         string `json:"namespace"`
	Service           string `json:"service"`
	NewReplicaSet     string `json:"newReplicaSet"`
	Revision          int64  `json:"revision"`
	Replicas          int32  `json:"replicas"`
	AvailableReplicas int32  `json:"availableReplicas"`
	Outcome           string `json:"outcome"`
	// DesiredReplicas is the replicas the rollout ended with: an operator's
	// scale of the rollout changes it.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// RestartedAt is the pod template's restart annotation at the end (an
	// operator's restart of the rollout sets it).
	RestartedAt string `json:"restartedAt,omitempty"`
	// UndoneTo is the revision an operator's undo returned the rollout to:
	// it no longer runs the template it was started with.
	UndoneTo int64 `json:"undoneTo,omitempty"`
	// Canary and BlueGreen are how far a canary's or a blue-green's steps got.
	Canary    *StepsResult `json:"canary,omitempty"`
	BlueGreen *StepsResult `json:"blueGreen,omitempty"`
}

// StepsResult is how far a canary's (or a blue-green's) steps got: the
// first Completed steps ran; a promote --full at step PromotedFull
// (1-based) skipped the rest.
type StepsResult struct {
	Steps        int    `json:"steps"`
	Completed    int    `json:"completed"`
	PromotedFull int    `json:"promotedFull,omitempty"`
	Reason       string `json:"reason,omitempty"` // why it aborted
	// BackgroundFailed says why a canary's background analysis failed.
	BackgroundFailed string `json:"backgroundFailed,omitempty"`
}

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
func RolloutWorkflow(ctx workflow.Context, in RolloutInput) (*RolloutResult, error) {
	if in.invalid != nil && refusesMalformedInput(ctx) {
		return nil, temporal.NewNonRetryableApplicationError(in.invalid.Error(), ErrInvalidInput, nil)
	}
	if err := refuseGuarded(ctx, in.guard(continued(ctx), workflow.GetInfo(ctx).ParentWorkflowExecution != nil)); err != nil {
		return nil, err
	}
	d, err := in.desired()
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidInput, nil)
	}
	r := newRolloutRun(ctx, in, d)
	r.behaviour = newBehaviour(ctx, in.FewerEvents, false)
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
			r.canary = &CanaryState{Counted: countsCanarySides(ctx)}
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
				r.rollBackToStable(OutcomeRolledBack)
				continue
			}
			r.settleControls()
			return nil, r.deadlineExceeded()
		}
		if r.complete() {
			if err := r.pinRolledOut(); err != nil {
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
func (r *rolloutRun) finish() (*RolloutResult, error) {
	res := r.result()
	switch r.outcome {
	case OutcomeRolledBack:
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
			ErrProgressDeadlineExceeded, nil, res)
	case OutcomeAborted:
		why := "rollout aborted"
		switch {
		case r.canary != nil && r.canary.Reason != "":
			why = "canary aborted: " + r.canary.Reason
		case r.blueGreen != nil && r.blueGreen.Reason != "":
			why = "blue-green aborted: " + r.blueGreen.Reason
		}
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: %s; revision %d is fully available again", r.in.Service, why, r.stableRevision),
			ErrRolloutAborted, nil, res)
	}
	res.Outcome = OutcomeComplete
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
	case OutcomeRolledBack:
		msg = fmt.Sprintf("%s: rolled back to revision %d, which made no progress within %ds (%d of %d available)",
			r.in.Service, r.stableRevision, *r.d.Spec.ProgressDeadlineSeconds, r.d.Status.AvailableReplicas, *r.d.Spec.Replicas)
	case OutcomeAborted:
		msg = fmt.Sprintf("%s: aborted; revision %d, going back, made no progress within %ds (%d of %d available)",
			r.in.Service, r.stableRevision, *r.d.Spec.ProgressDeadlineSeconds, r.d.Status.AvailableReplicas, *r.d.Spec.Replicas)
	}
	if cond != nil && cond.Message != "" {
		msg += ": " + cond.Message
	}
	return temporal.NewNonRetryableApplicationError(msg, ErrProgressDeadlineExceeded, nil, r.result())
}

// IDSeparator joins the parts of deployflow's workflow IDs. It cannot occur
// in a namespace, lease or service name (DNS labels: a-z, 0-9 and '-'), so
// no two (namespace, service) pairs share an ID.
const IDSeparator = ":"

// RolloutWorkflowID is the deterministic ID of a service's rollout, so one
// service never has two rollouts running side by side:
// rollout:<namespace>:<service>.
func RolloutWorkflowID(namespace, service string) string {
	return "rollout" + IDSeparator + namespace + IDSeparator + service
}

// ClusterRolloutWorkflowID is the rollout of a service of a lease's
// deploy to cluster (issue 23.1): rollout@<cluster>:<namespace>:<service>,
// so each cluster's rollout of the lease's namespace is its own workflow.
func ClusterRolloutWorkflowID(cluster, namespace, service string) string {
	if cluster == "" {
		return RolloutWorkflowID(namespace, service)
	}
	return "rollout@" + cluster + IDSeparator + namespace + IDSeparator + service
}

// ParseRolloutWorkflowID is RolloutWorkflowID's inverse.
func ParseRolloutWorkflowID(id string) (namespace, service string, ok bool) {
	parts := strings.Split(id, IDSeparator)
	if len(parts) != 3 || parts[0] != "rollout" || parts[1] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// LegacyRolloutWorkflowID is the ID rollouts had before IDSeparator: parts
// joined by '-', which two leases could share (lease a, service b-c and
// lease a-b, service c). Lease workflows started before the change keep
// using it for the rollouts they run (see versionRolloutID); the CLI falls
// back to it only after checking the rollout's own namespace and service.
func LegacyRolloutWorkflowID(namespace, service string) string {
	return "rollout-" + namespace + "-" + service
}
