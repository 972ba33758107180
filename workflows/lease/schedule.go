package lease

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/lease"
)

// ScheduledDeployWorkflow is a schedule's action. Schedules start their
// workflows under timestamped IDs, so it does not deploy by itself beside the
// lease's workflow: it hands the request to deploy-<lease>, which deploys
// one thing at a time.
func ScheduledDeployWorkflow(ctx workflow.Context, in api.ScheduledDeployInput) error {
	if in.Action != api.RedeployRestart && in.Action != api.RedeployReapply {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("action %q: want %s or %s", in.Action, api.RedeployRestart, api.RedeployReapply), api.ErrInvalidInput, nil)
	}
	if err := lease.ValidateID(in.Lease); err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("lease: %v", err), api.ErrInvalidInput, nil)
	}
	ctx = workflow.WithWorkflowRunTimeout(ctx, time.Minute)
	err := workflow.SignalExternalWorkflow(ctx, api.DeployWorkflowID(in.Lease), "", api.SignalRedeploy,
		api.RedeployRequest{Action: in.Action, Trigger: "schedule"}).Get(ctx, nil)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("lease %s has no running deploy workflow to %s: deploy it first (%v)", in.Lease, in.Action, err),
			api.ErrLeaseNotActive, nil)
	}
	return nil
}
