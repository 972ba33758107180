package lease

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// PlanWorkflow computes, on a worker, with the worker's configuration
// (blocked hostnames, IP pool) and the deploy chain's own code, what
// deploying a manifest would do. It writes nothing. `deployflow deploy
// --plan` prints its answer; `--yes` then deploys with the printed plan's
// fingerprint, and the lease's workflow refuses to act on any other plan.
func PlanWorkflow(ctx workflow.Context, in api.PlanRequest) (*activities.DeployPlan, error) {
	if err := validateManifest(&in.Manifest, false); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidManifest, nil)
	}
	// Taken as the lease's workflow takes it, its defaults filled once, as
	// the deploy chain fills them.
	m := withDefaults(plannedAs(ctx, &in.Manifest))
	ctx = flow.PlanCall(ctx, "plan lease "+in.Manifest.Lease)
	var a *activities.Activities
	var l activities.LeaseInfo
	if err := workflow.ExecuteLocalActivity(ctx, a.CheckLease, in.Manifest.Lease).Get(ctx, &l); err != nil {
		return nil, err
	}
	var plan activities.DeployPlan
	if err := workflow.ExecuteLocalActivity(ctx, a.PlanDeploy, activities.PlanInput{Manifest: *m, Owner: l.Owner}).Get(ctx, &plan); err != nil {
		return nil, err
	}
	return &plan, nil
}
