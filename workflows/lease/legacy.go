package lease

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// Legacy paths: what runs that started before a change of the workflow's
// code do, so that they (and their recorded histories) replay as they
// ran. The rest of the package reads only the current path: where the
// paths part it asks a method of this file, named for what the current
// path does, and every older path's code is here. internal/flow/gates.go lists the
// changes, which methods ask each, and the histories that still need it;
// a retired gate's methods go from this file with it (docs/upgrading.md,
// "Changing workflow code"). TestGatesAreAskedOnlyInTheLegacyFile keeps it
// so.

// Input (both workflows).

// confirmsClose: an observation that the lease closed is confirmed by
// reading the lease's record before anything is torn down (runs before it
// tore down on the observation).
func (w *deployRun) confirmsClose() bool { return flow.Gate(w.ctx, flow.VersionConfirmedClose) }

// The lease's workflow.

// recordsApprovedPlan: once approved, the plan read again is recorded (a
// 1 ms timer ends the workflow task) before the first write; runs before
// it wrote in the same task.
func (w *deployRun) recordsApprovedPlan() bool {
	return flow.Gate(w.ctx, flow.VersionDurableBeforeWrite)
}

// marksUpgradeTest: only the live upgrade test's build B marks its deploys.
func (w *deployRun) marksUpgradeTest() bool {
	return upgradeTestBuild && flow.Gate(w.ctx, flow.VersionUpgradeTest)
}

// legacyPrepare checks the lease and plans the deploy of m in two calls.
func (w *deployRun) legacyPrepare(m *manifest.Manifest) (*activities.LeaseInfo, *activities.DeployPlan, error) {
	lease, err := w.checkLease(m.Lease)
	if err != nil {
		return nil, nil, err
	}
	w.Owner = lease.Owner
	plan, err := w.planDeploy(m)
	return lease, plan, err
}

// legacyApplyWorkload is applyWorkload in one local activity per call; on
// an error the result holds each part done before it.
func (w *deployRun) legacyApplyWorkload(m *manifest.Manifest, owner string) (activities.ApplyDeployResult, error) {
	var a *activities.Activities
	var res activities.ApplyDeployResult
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
		return res, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidManifest, nil)
	}
	objects.DeployID = w.deployID()
	objects.Previous = w.Objects
	var applied activities.ApplyObjectsResult
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("apply services and ingress"), a.ApplyObjects, objects).Get(w.ctx, &applied); err != nil {
		return res, err
	}
	res.Applied = &applied
	for _, svc := range m.ServiceNames() {
		d, err := m.Deployment(svc)
		if err != nil {
			return res, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidManifest, nil)
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

// legacyFinish releases what m dropped in one local activity per kind.
func (w *deployRun) legacyFinish(m *manifest.Manifest) (activities.FinishDeployResult, error) {
	var a *activities.Activities
	var res activities.FinishDeployResult
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

// Rollouts.

// accepted is manifest m as the lease's workflow takes it when sent (a
// start, the deploy update): its services without a security section get
// the hardened one (issue 35.4). Runs that took a manifest before that
// change recorded it as sent, and rendered its pods unhardened. A run
// continued from one that did not take the change asks it here, once.
//
// A return to the lease's last-known-good manifest (returning: a
// placement's, conditional on the lease's last deploy) takes it as
// recorded: it reuses its ReplicaSets and rolls no pod, whether or not it
// was taken hardened. A user's deploy of it is taken as a plan shows it
// (plannedAs): hardened.
func (w *deployRun) accepted(m *manifest.Manifest, returning bool) *manifest.Manifest {
	if returning && w.LastGood != nil && sameManifest(m, w.LastGood) {
		return m
	}
	if !w.TakesHardened {
		w.TakesHardened = flow.Gate(w.ctx, flow.VersionHardenedPods)
	}
	return hardenedIf(w.TakesHardened, m)
}

// plannedAs is m as a plan takes it: as the lease's workflow would.
func plannedAs(ctx workflow.Context, m *manifest.Manifest) *manifest.Manifest {
	return hardenedIf(flow.Gate(ctx, flow.VersionHardenedPods), m)
}

func hardenedIf(hardened bool, m *manifest.Manifest) *manifest.Manifest {
	if !hardened {
		return m
	}
	return m.Hardened()
}

// releaseOnEarlyFailure gives back what a deploy that failed before
// changing the workload took: only its plan's new hostnames and IPs
// (asked only then); runs before the change gave back everything the
// lease held beyond its last-known-good manifest (releaseUnheld).
func (w *deployRun) releaseOnEarlyFailure() []string {
	if !flow.Gate(w.ctx, flow.VersionReleaseWhatItTook) {
		return w.releaseUnheld()
	}
	return w.releaseTaken()
}

// legacyReportPhase reports the lease's phase as a metric (runs before
// fewer-events; later ones count phases from visibility).
func (w *deployRun) legacyReportPhase(phase string) {
	var a *activities.Activities
	_ = workflow.ExecuteLocalActivity(w.probeCtx("phase "+phase), a.ReportPhase, activities.PhaseReport{Lease: w.lease, Phase: phase}).Get(w.ctx, nil)
}
