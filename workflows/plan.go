package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/manifest"
)

// PlanRequest is PlanWorkflow's input: the manifest to plan.
type PlanRequest struct {
	Manifest manifest.Manifest `json:"manifest"`
}

// PlanWorkflowID is the ID of the plan of manifest m:
// plan:<lease>:<hash of the manifest>. The same manifest gets the same ID, so
// two users planning it share one read-only run; different manifests never
// do.
func PlanWorkflowID(m manifest.Manifest) string {
	b, _ := json.Marshal(m.WithDefaults())
	sum := sha256.Sum256(b)
	return "plan" + IDSeparator + m.Lease + IDSeparator + hex.EncodeToString(sum[:8])
}

// PlanWorkflow computes, on a worker, with the worker's configuration
// (blocked hostnames, IP pool) and the deploy chain's own code, what
// deploying a manifest would do. It writes nothing. `deployflow deploy
// --plan` prints its answer; `--yes` then deploys with the printed plan's
// fingerprint, and the lease's workflow refuses to act on any other plan.
func PlanWorkflow(ctx workflow.Context, in PlanRequest) (*activities.DeployPlan, error) {
	if err := validateManifest(ctx, &in.Manifest, false); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidManifest, nil)
	}
	// Taken as the lease's workflow takes it, its defaults filled once, as
	// the deploy chain fills them.
	m := plannedAs(ctx, &in.Manifest).WithDefaults()
	ctx = planCall(ctx, "plan lease "+in.Manifest.Lease)
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
