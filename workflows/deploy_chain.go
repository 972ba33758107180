package workflows

import (
	"errors"
	"fmt"
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/manifest"
)

// chainResult is what one run of the deploy chain did.
type chainResult struct {
	classes    map[string]string // service -> change class
	withheld   []activities.Withheld
	changed    bool     // something of the workload was written
	operations []string // what was done, in the plan's words
	// ran is the manifest as it was rolled out: the one deployed, with what
	// operators changed of its rollouts (scale, restart) folded in.
	ran *manifest.Manifest
}

// ErrRolloutUndone: an operator undid a lease's rollout; the lease returns
// to its last-known-good manifest instead of recording the new one.
const ErrRolloutUndone = "RolloutUndone"

var errSuperseded = errors.New("superseded by a newer manifest")

// runChain is one deploy of manifest m, in the Akash provider's order:
// lease check → plan (hostname conflicts fail here, before any write) →
// approval, if the manifest asks for it → declared IPs → hostname
// reservations → namespace, Services, Ingress → one rollout per changed
// service, in parallel → release what the manifest no longer declares, once
// the new version is healthy.
func (w *deployRun) runChain(m *manifest.Manifest) (chainResult, error) {
	res := chainResult{classes: map[string]string{}}
	m = m.WithDefaults()
	ns := manifest.Namespace(m.Lease)
	var a *activities.Activities

	// 1. The lease must be active.
	lease, err := w.checkLease(m.Lease)
	if err != nil {
		return res, err
	}
	w.owner = lease.Owner

	// 2. The plan, read from the cluster with the code `deploy --plan`
	// runs; another owner's hostname fails the deploy here.
	plan, err := w.planDeploy(m)
	if err != nil {
		return res, err
	}
	switch {
	case w.approvedPlan != "" && !w.reverting:
		// Approved up front (deploy --plan --yes): only the plan reviewed.
		if plan.Fingerprint != w.approvedPlan {
			return res, fmt.Errorf("%w (plan %s was approved, the deploy's plan is %s): nothing was changed; plan again and approve the new plan",
				errStaleApproval, w.approvedPlan, plan.Fingerprint)
		}
	case m.RequireApproval:
		if err := w.awaitApproval(m, plan); err != nil {
			return res, err
		}
	}
	heldBefore := map[string]bool{}
	for _, h := range m.Hostnames() {
		heldBefore[h] = !contains(plan.ReserveHostnames, h)
	}

	// 3. Declared IPs: existing endpoints keep theirs, new ones get one.
	var ips map[string]string
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("reserve IPs"), a.EnsureIPs, activities.IPsInput{
		Lease: m.Lease, Owner: lease.Owner, Endpoints: m.IPEndpoints(),
	}).Get(w.ctx, &ips); err != nil {
		return res, err
	}
	w.ips = ips
	for _, e := range m.IPEndpoints() {
		if _, kept := plan.KeepIPs[e]; !kept {
			res.operations = append(res.operations, activities.OpAllocateIP(e))
		}
	}

	// 4. Hostname reservations; the same owner's other leases keep theirs.
	var hosts activities.HostnamesResult
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("reserve hostnames"), a.ReserveHostnames, activities.HostnamesInput{
		Lease: m.Lease, Owner: lease.Owner, Hostnames: m.Hostnames(),
	}).Get(w.ctx, &hosts); err != nil {
		return res, err
	}
	res.withheld = hosts.Withheld
	w.hostnames, w.withheld = hosts.Reserved, hosts.Withheld
	for _, h := range hosts.Reserved {
		if !heldBefore[h] {
			res.operations = append(res.operations, activities.OpReserveHostname(h))
		}
	}

	// 5. Namespace, Services, LoadBalancer Services and Ingress.
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("ensure namespace "+ns), a.EnsureNamespace, activities.EnsureNamespaceInput{
		Name: ns, Labels: map[string]string{manifest.LeaseLabel: m.Lease, manifest.ManagedByLabel: manifest.ManagedBy},
	}).Get(w.ctx, nil); err != nil {
		return res, err
	}
	objects, err := activities.RenderObjects(m, ips, hosts.Withheld)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidManifest, nil)
	}
	objects.DeployID = w.deployID()
	objects.Previous = w.objects
	var applied activities.ApplyObjectsResult
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("apply services and ingress"), a.ApplyObjects, objects).Get(w.ctx, &applied); err != nil {
		return res, err
	}
	w.objects = applied.Kept
	res.changed = len(applied.Changed)+len(applied.Pruned) > 0
	for _, o := range applied.Changed {
		res.operations = append(res.operations, activities.OpApply(o))
	}
	for _, o := range applied.Pruned {
		res.operations = append(res.operations, activities.OpDelete(o))
	}

	// 6. Classify each service's change before acting on it.
	rollouts := map[string]RolloutInput{}
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
		if c.Class == activities.ChangeNone && activities.TouchesService(applied, m, svc) {
			c.Class = activities.ChangeMetadata
		}
		res.classes[svc] = c.Class
		if op := activities.OpService(c); op != "" {
			res.operations = append(res.operations, op)
		}
		if c.Class == activities.ChangeScale || c.Class == activities.ChangeRollout {
			rollouts[svc] = RolloutInput{Namespace: ns, Service: svc, Deployment: *d, AutoRollback: autoRollback(m, svc)}
		}
	}
	w.classes = res.classes

	// 7. Roll the changed services out, in parallel. What the lease records
	// follows what they ended on.
	res.ran = m
	if len(rollouts) > 0 {
		res.changed = true
		results, err := w.rollOut(rollouts)
		if err != nil {
			return res, err
		}
		if gate(w.ctx, versionLeaseFollowsRollout) {
			if res.ran, err = followRollouts(m, results); err != nil {
				return res, err
			}
		}
	}

	// 8. Healthy: release hostnames and IPs the manifest no longer declares.
	var released []string
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("release dropped hostnames"), a.ReleaseHostnames, activities.ReleaseInput{
		Lease: m.Lease, Keep: m.Hostnames(),
	}).Get(w.ctx, &released); err != nil {
		return res, err
	}
	for _, h := range released {
		res.operations = append(res.operations, activities.OpReleaseHostname(h))
	}
	released = nil
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("release dropped IPs"), a.ReleaseIPs, activities.ReleaseInput{
		Lease: m.Lease, Keep: m.IPEndpoints(),
	}).Get(w.ctx, &released); err != nil {
		return res, err
	}
	for _, e := range released {
		res.operations = append(res.operations, activities.OpReleaseIP(e))
	}
	return res, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func autoRollback(m *manifest.Manifest, svc string) bool {
	if s, ok := m.Lookup(svc); ok && s.Rollout != nil && s.Rollout.AutoRollback != nil {
		return *s.Rollout.AutoRollback
	}
	return true
}

// rollOut runs one RolloutWorkflow child per service and waits for all of
// them. A newer manifest or a teardown request cancels them after their
// current step (the next deploy continues from wherever they stopped, as a
// Deployment does when its template changes mid-rollout); so does the lease
// closing, which the wait checks on the health timer.
func (w *deployRun) rollOut(rollouts map[string]RolloutInput) (map[string]RolloutResult, error) {
	childCtx, cancel := workflow.WithCancel(w.ctx)
	defer cancel()
	services := make([]string, 0, len(rollouts))
	for svc := range rollouts {
		services = append(services, svc)
	}
	sort.Strings(services)

	rolloutID := RolloutWorkflowID
	if !gate(w.ctx, versionRolloutID) {
		rolloutID = LegacyRolloutWorkflowID // a lease workflow that started its rollouts before the change
	}
	errs := map[string]error{}
	results := map[string]RolloutResult{}
	done := 0
	for _, svc := range services {
		in := rollouts[svc]
		opts := workflow.ChildWorkflowOptions{
			WorkflowID:          rolloutID(in.Namespace, svc),
			WaitForCancellation: true,
			ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
			StaticSummary:       fmt.Sprintf("rollout %s to %s", svc, firstImage(in)),
		}
		f := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(childCtx, opts), RolloutWorkflow, in)
		workflow.Go(w.ctx, func(gctx workflow.Context) {
			var r RolloutResult
			errs[svc] = f.Get(gctx, &r)
			results[svc] = r
			done++
		})
	}

	var interrupted error
	for done < len(services) {
		woken, err := workflow.AwaitWithTimeout(w.ctx, w.healthInterval, func() bool {
			// Once interrupted, only the children's ends are awaited.
			return done == len(services) || interrupted == nil && (w.teardown || w.pending != nil)
		})
		if err != nil {
			return nil, err
		}
		if !woken && interrupted == nil {
			if active, err := w.leaseActive(); err == nil && !active {
				w.teardown = true
			}
		}
		if interrupted == nil && (w.teardown || w.pending != nil) && done < len(services) {
			interrupted = errSuperseded
			if w.teardown {
				interrupted = errTeardown
			}
			cancel()
		}
	}
	if interrupted != nil {
		return nil, interrupted
	}
	var failed []string
	var first error
	for _, svc := range services {
		if err := errs[svc]; err != nil {
			failed = append(failed, svc)
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		return nil, fmt.Errorf("rollout of %v failed: %w", failed, first)
	}
	return results, nil
}

// followRollouts is m as its rollouts ended: a service an operator scaled or
// restarted through its rollout runs that, and the lease records it. A
// service an operator undid no longer runs m's template: that is an error
// (RolloutUndone), and the lease returns to its last-known-good manifest.
func followRollouts(m *manifest.Manifest, results map[string]RolloutResult) (*manifest.Manifest, error) {
	out := *m
	out.Services = append([]manifest.Service(nil), m.Services...)
	for i, s := range out.Services {
		r, ok := results[s.Name]
		if !ok {
			continue
		}
		if r.UndoneTo != 0 {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("%s: an operator undid the rollout (back to revision %d); the lease returns to its last-known-good manifest", s.Name, r.UndoneTo),
				ErrRolloutUndone, nil)
		}
		if s.Replicas == nil || *s.Replicas != r.DesiredReplicas {
			n := r.DesiredReplicas
			out.Services[i].Replicas = &n
		}
		if r.RestartedAt != "" && s.PodAnnotations[RestartedAtAnnotation] != r.RestartedAt {
			ann := map[string]string{RestartedAtAnnotation: r.RestartedAt}
			for k, v := range s.PodAnnotations {
				if k != RestartedAtAnnotation {
					ann[k] = v
				}
			}
			out.Services[i].PodAnnotations = ann
		}
	}
	return &out, nil
}

func firstImage(in RolloutInput) string {
	if cs := in.Deployment.Spec.Template.Spec.Containers; len(cs) > 0 {
		return cs[0].Image
	}
	return ""
}
