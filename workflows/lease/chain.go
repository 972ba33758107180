package lease

import (
	"errors"
	"fmt"
	"sort"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	planpkg "github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/workflows/internal/flow"
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

var errSuperseded = errors.New("superseded by a newer manifest")

// runChain is one deploy of manifest m, in the Akash provider's order:
// lease check → plan (hostname conflicts fail here, before any write) →
// approval, if the manifest asks for it → then the plan's tree, executed
// node by node (execute.go): declared IPs, hostname reservations,
// namespace, Services and Ingress → one rollout per changed service, in
// parallel → release what the manifest no longer declares, once the new
// version is healthy.
func (w *deployRun) runChain(m *manifest.Manifest) (chainResult, error) {
	res := chainResult{classes: map[string]string{}}
	// Its defaults were filled where it entered the lease (lease/intake.go):
	// every step from here checks them (manifest.HasDefaults), none fills
	// them again.
	if !m.HasDefaults() {
		return res, temporal.NewNonRetryableApplicationError("the manifest of lease "+m.Lease+
			" has no defaults: every manifest enters a lease's workflow through lease/intake.go, which fills them", api.ErrInvalidManifest, nil)
	}
	w.tree, w.nodes = nil, nil // set from the plan, below

	// 1. The lease must be active, and 2. the plan, read from the cluster
	// with the code `deploy --plan` runs; another owner's hostname fails the
	// deploy here.
	lease, plan, err := w.prepare(m)
	if err != nil {
		return res, err
	}
	w.taking = plan
	w.Owner = lease.Owner
	w.startTree(plan, m)
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
	err = w.execute(&execution{m: m, plan: plan, owner: lease.Owner, res: &res})
	return res, err
}

// union is a, then what of b a lacks, in their order.
func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, x := range b {
		if !contains(out, x) {
			out = append(out, x)
		}
	}
	return out
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
func (w *deployRun) rollOut(rollouts map[string]api.RolloutInput, stateful map[string]api.StatefulSetRolloutInput) (map[string]api.RolloutResult, error) {
	childCtx, cancel := workflow.WithCancel(w.ctx)
	defer cancel()
	services := make([]string, 0, len(rollouts)+len(stateful))
	for svc := range rollouts {
		services = append(services, svc)
	}
	for svc := range stateful {
		services = append(services, svc)
	}
	sort.Strings(services)

	rolloutID := w.rolloutWorkflowID()
	errs := map[string]error{}
	results := map[string]api.RolloutResult{}
	done := 0
	for _, svc := range services {
		var f workflow.ChildWorkflowFuture
		if sin, ok := stateful[svc]; ok {
			ctx := flow.RolloutChild(childCtx, rolloutID(sin.Namespace, svc), fmt.Sprintf("rollout %s (StatefulSet) to %s", svc, templateImage(sin.StatefulSet.Spec.Template.Spec)))
			f = workflow.ExecuteChildWorkflow(ctx, api.StatefulSetRolloutWorkflow, sin)
		} else {
			in := rollouts[svc]
			ctx := flow.RolloutChild(childCtx, rolloutID(in.Namespace, svc), fmt.Sprintf("rollout %s to %s", svc, firstImage(in)))
			f = workflow.ExecuteChildWorkflow(ctx, api.RolloutWorkflow, in)
		}
		if n := w.nodes[svc]; n != nil {
			flow.SetState(n, planpkg.Running, nil)
		}
		workflow.Go(w.ctx, func(gctx workflow.Context) {
			var r api.RolloutResult
			errs[svc] = f.Get(gctx, &r)
			results[svc] = r
			w.markRollout(svc, r, errs[svc])
			done++
		})
	}

	// The lease closing: the observer tells (fewer-events), a slow timer
	// checks in case it missed it; legacy runs check every healthInterval.
	tick := w.healthInterval
	if w.Batches() && w.in.HealthIntervalSeconds <= 0 {
		tick = defaultSafetyNet
	}
	w.rollingOut = true
	defer func() { w.rollingOut = false }()
	var interrupted error
	for done < len(services) {
		woken, err := workflow.AwaitWithTimeout(w.ctx, tick, func() bool {
			// Once interrupted, only the children's ends are awaited.
			return done == len(services) || interrupted == nil && (w.Teardown || w.Pending != nil || w.observation != nil)
		})
		if err != nil {
			return nil, err
		}
		if o := w.observation; o != nil {
			w.observation = nil
			w.Teardown = w.Teardown || o.Closed && w.closeConfirmed()
		}
		if !woken && interrupted == nil {
			if active, err := w.leaseActive(); err == nil && !active {
				w.Teardown = true
			}
		}
		if interrupted == nil && (w.Teardown || w.Pending != nil) && done < len(services) {
			interrupted = errSuperseded
			if w.Teardown {
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
func followRollouts(m *manifest.Manifest, results map[string]api.RolloutResult) (*manifest.Manifest, error) {
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
				api.ErrRolloutUndone, nil)
		}
		if s.Replicas == nil || *s.Replicas != r.DesiredReplicas {
			n := r.DesiredReplicas
			out.Services[i].Replicas = &n
		}
		if r.RestartedAt != "" && s.PodAnnotations[api.RestartedAtAnnotation] != r.RestartedAt {
			ann := map[string]string{api.RestartedAtAnnotation: r.RestartedAt}
			for k, v := range s.PodAnnotations {
				if k != api.RestartedAtAnnotation {
					ann[k] = v
				}
			}
			out.Services[i].PodAnnotations = ann
		}
	}
	return &out, nil
}

func firstImage(in api.RolloutInput) string { return templateImage(in.Deployment.Spec.Template.Spec) }

func templateImage(spec corev1.PodSpec) string {
	if cs := spec.Containers; len(cs) > 0 {
		return cs[0].Image
	}
	return ""
}

// statefulRollout is the rollout of stateful service svc of m (issue
// 39): its StatefulSet, and the Deployment d's progress deadline, its
// maxUnavailable as a count (at least 1), autoRollback and a canary's
// steps (not when returning to the last-known-good manifest).
func statefulRollout(m *manifest.Manifest, svc string, d *appsv1.Deployment, revert bool) (api.StatefulSetRolloutInput, error) {
	sts, err := m.StatefulSet(svc)
	if err != nil {
		return api.StatefulSetRolloutInput{}, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidManifest, nil)
	}
	in := api.StatefulSetRolloutInput{Namespace: sts.Namespace, Service: svc, StatefulSet: *sts,
		AutoRollback: autoRollback(m, svc), Revert: revert}
	if p := d.Spec.ProgressDeadlineSeconds; p != nil {
		in.ProgressDeadlineSeconds = *p
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, int(*sts.Spec.Replicas), false)
		if err == nil && n > 0 {
			in.MaxUnavailable = int32(n)
		}
	}
	if s, ok := m.Lookup(svc); ok && !revert && s.Rollout != nil && s.Rollout.Strategy == manifest.StrategyCanary {
		in.Steps, in.Background = s.Rollout.Steps, s.Rollout.Analysis
	}
	return in, nil
}

// maxReplicasOf is the most replicas service svc of m may be scaled to:
// the lease's bound in all (the plan's, from --max-replicas) less its other
// services' replicas; 0 where the plan has no bound (a plan of before it),
// -1 where the others take it all.
func maxReplicasOf(total int32, m *manifest.Manifest, svc string) int32 {
	if total <= 0 {
		return 0
	}
	for _, s := range m.Services {
		if s.Name != svc && s.Replicas != nil {
			total -= *s.Replicas
		}
	}
	if total <= 0 {
		return -1
	}
	return total
}
