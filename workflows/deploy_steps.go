package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Where the deploy chain touches the cluster: three local activities, one
// history event each (versionFewerEvents). Runs that predate it replay the
// same steps as the separate calls they recorded (legacy.go).

// prepare checks the lease and plans the deploy of m.
func (w *deployRun) prepare(m *manifest.Manifest) (*activities.LeaseInfo, *activities.DeployPlan, error) {
	if !w.batches() {
		return w.legacyPrepare(m)
	}
	var a *activities.Activities
	var res activities.PrepareDeployResult
	if err := workflow.ExecuteLocalActivity(kubeSteps(w.ctx, "check lease "+m.Lease+" and plan"), a.PrepareDeploy,
		activities.PrepareDeployInput{Manifest: *m}).Get(w.ctx, &res); err != nil {
		return nil, nil, err
	}
	w.plan = &res.Plan
	return &res.Lease, &res.Plan, nil
}

// applyWorkload reserves m's IPs and hostnames, applies its namespace,
// Services and Ingress and classifies each service's change. On an error
// the result holds what was done before it (legacy runs record each part).
func (w *deployRun) applyWorkload(m *manifest.Manifest, owner string) (activities.ApplyDeployResult, error) {
	var a *activities.Activities
	var res activities.ApplyDeployResult
	if !w.batches() {
		return w.legacyApplyWorkload(m, owner)
	}
	err := workflow.ExecuteLocalActivity(kubeSteps(w.ctx, "reserve, apply services and ingress, classify"), a.ApplyDeploy,
		activities.ApplyDeployInput{Manifest: *m, Owner: owner, DeployID: w.deployID(), Previous: w.objects}).Get(w.ctx, &res)
	return res, err
}

// finish releases the hostnames and IPs m no longer declares, once the new
// version is healthy, and (fewer-events) reports the deploy's duration.
func (w *deployRun) finish(m *manifest.Manifest) (activities.FinishDeployResult, error) {
	var a *activities.Activities
	var res activities.FinishDeployResult
	if !w.batches() {
		return w.legacyFinish(m)
	}
	in := activities.FinishDeployInput{Lease: m.Lease, KeepHostnames: m.Hostnames(), KeepIPs: m.IPEndpoints()}
	if !w.reverting {
		in.Report = &activities.DeployReport{Lease: w.lease, Seconds: workflow.Now(w.ctx).Sub(w.deployStarted).Seconds(), Result: "success"}
	}
	err := workflow.ExecuteLocalActivity(kubeSteps(w.ctx, "release what the manifest dropped"), a.FinishDeploy, in).Get(w.ctx, &res)
	return res, err
}
