package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Where the deploy chain touches the cluster: three local activities, one
// history event each (versionFewerEvents). Runs that predate it replay the
// same steps as the separate calls they recorded (the "legacy" branches).

// prepare checks the lease and plans the deploy of m.
func (w *deployRun) prepare(m *manifest.Manifest) (*activities.LeaseInfo, *activities.DeployPlan, error) {
	if !w.fewer {
		lease, err := w.checkLease(m.Lease)
		if err != nil {
			return nil, nil, err
		}
		w.owner = lease.Owner
		plan, err := w.planDeploy(m)
		return lease, plan, err
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
	if w.fewer {
		err := workflow.ExecuteLocalActivity(kubeSteps(w.ctx, "reserve, apply services and ingress, classify"), a.ApplyDeploy,
			activities.ApplyDeployInput{Manifest: *m, Owner: owner, DeployID: w.deployID(), Previous: w.objects}).Get(w.ctx, &res)
		return res, err
	}
	// Legacy: one local activity per call.
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("reserve IPs"), a.EnsureIPs, activities.IPsInput{
		Lease: m.Lease, Owner: owner, Endpoints: m.IPEndpoints(),
	}).Get(w.ctx, &res.IPs); err != nil {
		return res, err
	}
	var hosts activities.HostnamesResult
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("reserve hostnames"), a.ReserveHostnames, activities.HostnamesInput{
		Lease: m.Lease, Owner: owner, Hostnames: m.Hostnames(),
	}).Get(w.ctx, &hosts); err != nil {
		return res, err
	}
	res.Hostnames = &hosts
	ns := manifest.Namespace(m.Lease)
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("ensure namespace "+ns), a.EnsureNamespace, activities.EnsureNamespaceInput{
		Name: ns, Labels: map[string]string{manifest.LeaseLabel: m.Lease, manifest.ManagedByLabel: manifest.ManagedBy},
	}).Get(w.ctx, nil); err != nil {
		return res, err
	}
	objects, err := activities.RenderObjects(m, res.IPs, hosts.Withheld)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidManifest, nil)
	}
	objects.DeployID = w.deployID()
	objects.Previous = w.objects
	var applied activities.ApplyObjectsResult
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("apply services and ingress"), a.ApplyObjects, objects).Get(w.ctx, &applied); err != nil {
		return res, err
	}
	res.Applied = &applied
	for _, svc := range m.ServiceNames() {
		d, err := m.Deployment(svc)
		if err != nil {
			return res, temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidManifest, nil)
		}
		var c activities.Classification
		if err := workflow.ExecuteLocalActivity(w.kubeCtx("classify "+svc), a.ClassifyService, activities.ClassifyInput{
			Deployment: d, Service: svc,
		}).Get(w.ctx, &c); err != nil {
			return res, err
		}
		c.Service = svc
		res.Classes = append(res.Classes, c)
	}
	return res, nil
}

// finish releases the hostnames and IPs m no longer declares, once the new
// version is healthy, and (fewer-events) reports the deploy's duration.
func (w *deployRun) finish(m *manifest.Manifest) (activities.FinishDeployResult, error) {
	var a *activities.Activities
	var res activities.FinishDeployResult
	if w.fewer {
		in := activities.FinishDeployInput{Lease: m.Lease, KeepHostnames: m.Hostnames(), KeepIPs: m.IPEndpoints()}
		if !w.reverting {
			in.Report = &activities.DeployReport{Lease: w.lease, Seconds: workflow.Now(w.ctx).Sub(w.deployStarted).Seconds(), Result: "success"}
		}
		err := workflow.ExecuteLocalActivity(kubeSteps(w.ctx, "release what the manifest dropped"), a.FinishDeploy, in).Get(w.ctx, &res)
		return res, err
	}
	// Legacy: one local activity per kind.
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("release dropped hostnames"), a.ReleaseHostnames, activities.ReleaseInput{
		Lease: m.Lease, Keep: m.Hostnames(),
	}).Get(w.ctx, &res.Hostnames); err != nil {
		return res, err
	}
	err := workflow.ExecuteLocalActivity(w.kubeCtx("release dropped IPs"), a.ReleaseIPs, activities.ReleaseInput{
		Lease: m.Lease, Keep: m.IPEndpoints(),
	}).Get(w.ctx, &res.IPs)
	return res, err
}
