package lease

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	planpkg "github.com/deployflow/deployflow/internal/plan"
)

// The deploy executes its plan (issue 36.1). The tree `deploy --plan`
// prints, built in internal/plan from what the plan read, is the program:
// execute walks its steps in order and runs each one's operation through
// its activity, and each node is marked by what its operation did
// (tree.go). Where the cluster changed between the plan and the write, the
// tree shows it: an operation the plan did not list is added, marked so;
// one it listed that had nothing left to do is skipped.

// execution is one run of a deploy's tree: what its steps hand on.
type execution struct {
	m     *manifest.Manifest
	plan  *activities.DeployPlan
	owner string
	res   *chainResult
	// rollouts are the changed services' rollouts, by service, as the
	// apply step classified them; stateful, the stateful services' (issue
	// 39: their StatefulSets, stepped by the partition).
	rollouts map[string]api.RolloutInput
	stateful map[string]api.StatefulSetRolloutInput
}

// execute runs the deploy's tree, step by step in its order: the lease
// check (done with the plan that made the tree), the apply step, the
// changed services' rollouts (siblings, run together) and the release.
func (w *deployRun) execute(x *execution) error {
	for i := 0; i < len(w.tree.Children); i++ {
		n := w.tree.Children[i]
		var err error
		switch n.Op {
		case planpkg.OpCheckLease:
			// Checked with the plan that made this tree (startTree marked it).
		case planpkg.OpApply:
			err = w.apply(x, n)
		case planpkg.OpRollOut, planpkg.OpScale:
			j := i + 1
			for j < len(w.tree.Children) && isService(w.tree.Children[j]) {
				j++
			}
			err = w.rollOutServices(x, w.tree.Children[i:j])
			i = j - 1
		case planpkg.OpRelease:
			err = w.release(x, n)
		default:
			err = fmt.Errorf("the deploy's plan has a step this worker does not run (%s %s): deploy again with this worker's plan", n.Op, n.Target)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func isService(n *planpkg.Node) bool { return n.Op == planpkg.OpRollOut || n.Op == planpkg.OpScale }

// apply is the apply step: 3. declared IPs (existing endpoints keep
// theirs, new ones get one); 4. hostname reservations (the same owner's
// other leases keep theirs); 5. namespace, Services, LoadBalancer Services
// and Ingress; 6. each service's change, classified before acting on it,
// which makes the rollouts the tree's service nodes run.
func (w *deployRun) apply(x *execution, step *planpkg.Node) error {
	m, plan, res := x.m, x.plan, x.res
	heldBefore := map[string]bool{}
	for _, h := range m.Hostnames() {
		heldBefore[h] = !contains(plan.ReserveHostnames, h)
	}
	applied, err := w.applyWorkload(m, x.owner)
	// ran: the operations performed, by identity (operation and target).
	var ran []*planpkg.Node
	did := func(n *planpkg.Node) { ran = append(ran, n) }
	if applied.IPs != nil {
		w.IPs = applied.IPs
		for _, e := range m.IPEndpoints() {
			if _, kept := plan.KeepIPs[e]; !kept {
				did(planpkg.AllocateIP(e))
			}
		}
	}
	if hosts := applied.Hostnames; hosts != nil {
		res.withheld = hosts.Withheld
		w.Hostnames, w.Withheld = hosts.Reserved, hosts.Withheld
		for _, h := range hosts.Reserved {
			if !heldBefore[h] {
				did(planpkg.ReserveHostname(h))
			}
		}
	}
	if err == nil {
		// What the plan said it would change, and anything more the apply
		// found: a local activity that ran in a workflow task that then
		// failed (a signal arriving meanwhile: UnhandledCommand) runs again
		// and finds its objects applied already.
		for _, o := range union(plan.Objects, applied.Applied.Changed) {
			did(planpkg.ApplyObject(o))
		}
		for _, o := range union(plan.Prune, applied.Applied.Pruned) {
			did(planpkg.DeleteObject(o))
		}
	}
	res.operations = append(res.operations, texts(ran)...)
	w.markStep(step, ran, err)
	if err != nil {
		return err
	}
	w.Objects = applied.Applied.Kept
	res.changed = len(applied.Applied.Changed)+len(applied.Applied.Pruned) > 0
	x.rollouts, x.stateful = map[string]api.RolloutInput{}, map[string]api.StatefulSetRolloutInput{}
	// A return to the last-known-good manifest runs no canary steps and no
	// blue-green waits (runs that started before that change replay without).
	fastRevert := w.reverting
	ns := manifest.Namespace(m.Lease)
	for _, c := range applied.Classes {
		svc := c.Service
		d, err := m.Deployment(svc)
		if err != nil {
			return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidManifest, nil)
		}
		if c.Class == activities.ChangeNone && activities.TouchesService(*applied.Applied, m, svc) {
			c.Class = activities.ChangeMetadata
		}
		res.classes[svc] = c.Class
		if change, ok := activities.ServiceChange(c, m); ok {
			res.operations = append(res.operations, change.Text())
			w.serviceNode(change)
		}
		if s, ok := m.Lookup(svc); ok && s.Stateful() && (c.Class == activities.ChangeScale || c.Class == activities.ChangeRollout) {
			in, err := statefulRollout(m, svc, d, fastRevert)
			if err != nil {
				return err
			}
			x.stateful[svc] = in
			continue
		}
		if c.Class == activities.ChangeScale || c.Class == activities.ChangeRollout {
			in := api.RolloutInput{Namespace: ns, Service: svc, Deployment: *d, AutoRollback: autoRollback(m, svc), FewerEvents: w.Batches(), QuickWait: w.Batches(), Revert: fastRevert,
				MaxReplicas: maxReplicasOf(plan.MaxReplicas, m, svc)}
			if s, ok := m.Lookup(svc); ok && s.Rollout != nil && c.Class == activities.ChangeRollout {
				switch s.Rollout.Strategy {
				case manifest.StrategyCanary:
					if !fastRevert {
						in.Steps, in.Background = s.Rollout.Steps, s.Rollout.Analysis
					}
					// Through a Gateway, the weights are route weights.
					in.TrafficRoutes = applied.TrafficRoutes[svc]
					if len(in.TrafficRoutes) > 0 {
						in.ScaleDownDelaySeconds = s.Rollout.TrafficScaleDownDelay()
					}
				case manifest.StrategyBlueGreen:
					in.BlueGreen = &manifest.BlueGreen{}
					if b := s.Rollout.BlueGreen; b != nil {
						in.BlueGreen = b
					}
					// Through a Gateway, the switch is a change of the
					// routes' backends (the apply's result says which
					// routes: none before it did).
					in.TrafficRoutes = applied.TrafficRoutes[svc]
				}
			}
			x.rollouts[svc] = in
		}
	}
	w.Classes = res.classes
	res.ran = m
	return nil
}

// rollOutServices runs the rollouts of the tree's service nodes, siblings,
// together (7.): each node the apply step found a change for (w.nodes);
// a planned one it found nothing left to do for is skipped. What the lease
// records follows what they ended on.
func (w *deployRun) rollOutServices(x *execution, nodes []*planpkg.Node) error {
	rollouts := map[string]api.RolloutInput{}
	stateful := map[string]api.StatefulSetRolloutInput{}
	for _, n := range nodes {
		in, ok := x.rollouts[n.Target]
		sin, isStateful := x.stateful[n.Target]
		if !ok && !isStateful || w.nodes[n.Target] != n {
			w.skip(n, errors.New("nothing left to do"))
			continue
		}
		if isStateful {
			stateful[n.Target] = sin
			continue
		}
		rollouts[n.Target] = in
	}
	if len(rollouts)+len(stateful) == 0 {
		return nil
	}
	res := x.res
	res.changed = true
	results, err := w.rollOut(rollouts, stateful)
	if err != nil {
		return err
	}
	res.ran, err = followRollouts(x.m, results)
	return err
}

// release is the release step (8.): once healthy, the hostnames and IPs
// the manifest no longer declares go back.
func (w *deployRun) release(x *execution, step *planpkg.Node) error {
	plan, res := x.plan, x.res
	released, err := w.finish(x.m)
	if err == nil {
		// Released by now: what the plan said, whatever this attempt found
		// left to release (see the apply's above), and anything more.
		released.Hostnames = union(plan.ReleaseHostnames, released.Hostnames)
		released.IPs = union(plan.ReleaseIPs, released.IPs)
	}
	var ran []*planpkg.Node
	for _, h := range released.Hostnames {
		ran = append(ran, planpkg.ReleaseHostname(h))
	}
	for _, e := range released.IPs {
		ran = append(ran, planpkg.ReleaseIP(e))
	}
	w.markStep(step, ran, err)
	if err != nil {
		return err
	}
	res.operations = append(res.operations, texts(ran)...)
	return nil
}
