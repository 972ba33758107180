package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/internal/lease"
)

// Redeploy actions a schedule (or anyone) can ask a lease's workflow for.
const (
	// RedeployRestart rolls every pod of the lease onto a new revision of
	// the same manifest (kubectl rollout restart, for every service).
	RedeployRestart = "restart"
	// RedeployReapply deploys the lease's last-known-good manifest again,
	// repairing drift (a ReplicaSet scaled by hand, a deleted Service).
	RedeployReapply = "reapply"
)

// SignalRedeploy asks a lease's DeployWorkflow for a RedeployRequest.
const SignalRedeploy = "redeploy"

// RedeployRequest is the "redeploy" signal's argument.
type RedeployRequest struct {
	Action  string `json:"action"`
	Trigger string `json:"trigger,omitempty"`
}

// ScheduledDeployInput is what a Temporal Schedule starts
// ScheduledDeployWorkflow with.
type ScheduledDeployInput struct {
	Lease  string `json:"lease"`
	Action string `json:"action"`
}

// ScheduledDeployWorkflow is a schedule's action. Schedules start their
// workflows under timestamped IDs, so it does not deploy by itself beside the
// lease's workflow: it hands the request to deploy-<lease>, which deploys
// one thing at a time.
func ScheduledDeployWorkflow(ctx workflow.Context, in ScheduledDeployInput) error {
	if in.Action != RedeployRestart && in.Action != RedeployReapply {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("action %q: want %s or %s", in.Action, RedeployRestart, RedeployReapply), ErrInvalidInput, nil)
	}
	if err := lease.ValidateID(in.Lease); err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("lease: %v", err), ErrInvalidInput, nil)
	}
	ctx = workflow.WithWorkflowRunTimeout(ctx, time.Minute)
	err := workflow.SignalExternalWorkflow(ctx, DeployWorkflowID(in.Lease), "", SignalRedeploy,
		RedeployRequest{Action: in.Action, Trigger: "schedule"}).Get(ctx, nil)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("lease %s has no running deploy workflow to %s: deploy it first (%v)", in.Lease, in.Action, err),
			ErrLeaseNotActive, nil)
	}
	return nil
}
