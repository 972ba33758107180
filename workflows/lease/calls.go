package lease

import (
	"errors"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// Every call of the lease's workflow into the cluster, with its options
// (internal/flow/options.go has the budgets the rollouts share): the deploy chain's three
// batched steps (one history event each, flow.VersionFewerEvents; runs that
// predate it replay the separate calls of legacy.go), the plan, the idle
// loop's and the monitor's checks, the releases and the teardown.

// kubeCtx is for short, idempotent calls (local activities, retried for a
// day: an unreachable API server delays a deploy, it does not fail it).
func (w *deployRun) kubeCtx(summary string) workflow.Context { return flow.KubeCall(w.ctx, summary) }

// probeCtx is for the health monitor's observations: a few quick tries, then
// the tick reports Unknown instead of waiting for the cluster.
func (w *deployRun) probeCtx(summary string) workflow.Context { return flow.ProbeCall(w.ctx, summary) }

func (w *deployRun) checkLease(id string) (*activities.LeaseInfo, error) {
	var a *activities.Activities
	var l activities.LeaseInfo
	err := workflow.ExecuteLocalActivity(w.kubeCtx("check lease "+id), a.CheckLease, id).Get(w.ctx, &l)
	return &l, err
}

// leaseActive is the monitor's lease check: (false, nil) only when the
// lease is known to be closed or gone; an error when it cannot be told.
func (w *deployRun) leaseActive() (bool, error) {
	var a *activities.Activities
	var l activities.LeaseInfo
	err := workflow.ExecuteLocalActivity(w.probeCtx("check lease "+w.lease), a.CheckLease, w.lease).Get(w.ctx, &l)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrLeaseNotActive {
		return false, nil
	}
	return err == nil, err
}

func (w *deployRun) deleteWorkloads() error {
	var a *activities.Activities
	ctx := flow.TeardownCall(w.ctx, "delete namespace "+manifest.Namespace(w.lease))
	return workflow.ExecuteActivity(ctx, a.DeleteNamespace, manifest.Namespace(w.lease)).Get(w.ctx, nil)
}

func (w *deployRun) releaseAll() error {
	var a *activities.Activities
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("release IPs"), a.ReleaseIPs, activities.ReleaseInput{Lease: w.lease}).Get(w.ctx, nil); err != nil {
		return err
	}
	w.IPs = nil
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("release hostnames"), a.ReleaseHostnames, activities.ReleaseInput{Lease: w.lease}).Get(w.ctx, nil); err != nil {
		return err
	}
	w.Hostnames, w.Withheld = nil, nil
	return nil
}

func (w *deployRun) reportDeploy(rec api.DeployRecord, err error) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	var a *activities.Activities
	_ = workflow.ExecuteLocalActivity(w.probeCtx("report deploy"), a.ReportDeploy, activities.DeployReport{
		Lease: w.lease, Seconds: rec.Finished.Sub(rec.Started).Seconds(), Result: result,
	}).Get(w.ctx, nil)
}

// prepare checks the lease and plans the deploy of m.
func (w *deployRun) prepare(m *manifest.Manifest) (*activities.LeaseInfo, *activities.DeployPlan, error) {
	if !w.Batches() {
		return w.legacyPrepare(m)
	}
	var a *activities.Activities
	var res activities.PrepareDeployResult
	if err := workflow.ExecuteLocalActivity(flow.KubeSteps(w.ctx, "check lease "+m.Lease+" and plan"), a.PrepareDeploy,
		activities.PrepareDeployInput{Manifest: *m}).Get(w.ctx, &res); err != nil {
		return nil, nil, err
	}
	w.Plan = &res.Plan
	return &res.Lease, &res.Plan, nil
}

// applyWorkload reserves m's IPs and hostnames, applies its namespace,
// Services and Ingress and classifies each service's change. On an error
// the result holds what was done before it (legacy runs record each part).
func (w *deployRun) applyWorkload(m *manifest.Manifest, owner string) (activities.ApplyDeployResult, error) {
	var a *activities.Activities
	var res activities.ApplyDeployResult
	if !w.Batches() {
		return w.legacyApplyWorkload(m, owner)
	}
	err := workflow.ExecuteLocalActivity(flow.KubeSteps(w.ctx, "reserve, apply services and ingress, classify"), a.ApplyDeploy,
		activities.ApplyDeployInput{Manifest: *m, Owner: owner, DeployID: w.deployID(), Previous: w.Objects}).Get(w.ctx, &res)
	return res, err
}

// finish releases the hostnames and IPs m no longer declares, once the new
// version is healthy, and (fewer-events) reports the deploy's duration.
func (w *deployRun) finish(m *manifest.Manifest) (activities.FinishDeployResult, error) {
	var a *activities.Activities
	var res activities.FinishDeployResult
	if !w.Batches() {
		return w.legacyFinish(m)
	}
	in := activities.FinishDeployInput{Lease: m.Lease, KeepHostnames: m.Hostnames(), KeepIPs: m.IPEndpoints()}
	if !w.reverting {
		in.Report = &activities.DeployReport{Lease: w.lease, Seconds: workflow.Now(w.ctx).Sub(w.deployStarted).Seconds(), Result: "success"}
	}
	err := workflow.ExecuteLocalActivity(flow.KubeSteps(w.ctx, "release what the manifest dropped"), a.FinishDeploy, in).Get(w.ctx, &res)
	return res, err
}

// releaseUnheld releases the lease's hostnames and IPs that its
// last-known-good manifest does not declare (all of them when nothing is
// deployed) and returns what it released.
// releaseTaken gives back the hostnames and IP endpoints this deploy's
// plan took (w.taking) that the last-known-good manifest does not hold,
// and returns them. Nothing else the lease holds is released: a hostname
// its workload may still serve (its workflow started afresh, its
// last-known-good manifest lost) is not this deploy's to give back.
func (w *deployRun) releaseTaken() []string {
	if w.taking == nil {
		return nil
	}
	var keepHosts, keepIPs []string
	if w.LastGood != nil {
		keepHosts, keepIPs = w.LastGood.Hostnames(), w.LastGood.IPEndpoints()
	}
	var a *activities.Activities
	var out []string
	// What the lease holds, as far as this run knows: what the failed
	// deploy reserved and what the last-known-good manifest holds; the
	// failed deploy's withheld hostnames are no longer anyone's concern.
	held := append(slices.Clone(w.Hostnames), without(keepHosts, w.Hostnames)...)
	w.Hostnames, w.Withheld = held, nil
	if took := without(w.taking.ReserveHostnames, keepHosts); len(took) > 0 {
		var hosts []string
		if err := workflow.ExecuteLocalActivity(w.kubeCtx("release hostnames this deploy took"), a.ReleaseHostnames,
			activities.ReleaseInput{Lease: w.lease, Only: took}).Get(w.ctx, &hosts); err == nil {
			for _, h := range hosts {
				out = append(out, "hostname "+h)
			}
			w.Hostnames = without(w.Hostnames, hosts)
		}
	}
	if took := without(w.taking.AllocateIPs, keepIPs); len(took) > 0 {
		var ips []string
		if err := workflow.ExecuteLocalActivity(w.kubeCtx("release IPs this deploy took"), a.ReleaseIPs,
			activities.ReleaseInput{Lease: w.lease, Only: took}).Get(w.ctx, &ips); err == nil {
			for _, e := range ips {
				out = append(out, "IP of "+e)
				delete(w.IPs, e)
			}
		}
	}
	return out
}

// without is list without the items of drop, in list's order.
func without(list, drop []string) []string {
	var out []string
	for _, s := range list {
		if !contains(drop, s) {
			out = append(out, s)
		}
	}
	return out
}

// releaseUnheld gives back every hostname and IP endpoint of the lease
// that the last-known-good manifest does not hold (runs before
// release-what-it-took).
func (w *deployRun) releaseUnheld() []string {
	var keepHosts, keepIPs []string
	if w.LastGood != nil {
		keepHosts, keepIPs = w.LastGood.Hostnames(), w.LastGood.IPEndpoints()
	}
	var a *activities.Activities
	var out, hosts, ips []string
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("release hostnames this deploy took"), a.ReleaseHostnames,
		activities.ReleaseInput{Lease: w.lease, Keep: keepHosts}).Get(w.ctx, &hosts); err == nil {
		for _, h := range hosts {
			out = append(out, "hostname "+h)
		}
		w.Hostnames, w.Withheld = keepHosts, nil
	}
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("release IPs this deploy took"), a.ReleaseIPs,
		activities.ReleaseInput{Lease: w.lease, Keep: keepIPs}).Get(w.ctx, &ips); err == nil {
		for _, e := range ips {
			out = append(out, "IP of "+e)
		}
		for e := range w.IPs {
			if !contains(keepIPs, e) {
				delete(w.IPs, e)
			}
		}
	}
	return out
}

// observeLease is the safety-net tick's own observation (from the worker's
// informers when in sync, else the API server); nil when the cluster cannot
// be observed.
func (w *deployRun) observeLease() *observe.Observation {
	var a *activities.Activities
	var o observe.Observation
	err := workflow.ExecuteLocalActivity(w.probeCtx("observe lease "+w.lease), a.ObserveLease, w.lease).Get(w.ctx, &o)
	if err != nil {
		var canceled *temporal.CanceledError
		if !errors.As(err, &canceled) {
			workflow.GetLogger(w.ctx).Warn("lease not observed", "lease", w.lease, "error", err)
		}
		return &observe.Observation{Lease: w.lease, Unknown: true}
	}
	return &o
}

// planDeploy computes the deploy's plan from the cluster, read-only.
func (w *deployRun) planDeploy(m *manifest.Manifest) (*activities.DeployPlan, error) {
	var a *activities.Activities
	var plan activities.DeployPlan
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("plan"), a.PlanDeploy, activities.PlanInput{
		Manifest: *m, Owner: w.Owner,
	}).Get(w.ctx, &plan); err != nil {
		return nil, err
	}
	w.Plan = &plan
	return &plan, nil
}

// rolloutWorkflowID names the lease's rollout children, collision-free:
// rollout:<namespace>:<service>, with the cluster for a lease's workflow
// of another cluster.
func (w *deployRun) rolloutWorkflowID() func(namespace, service string) string {
	if c := w.in.Cluster; c != "" {
		return func(namespace, service string) string { return api.ClusterRolloutWorkflowID(c, namespace, service) }
	}
	return api.RolloutWorkflowID
}
