package lease

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// The deploy's tree (issue 12.1): the plan's tree of operations, which the
// chain executes in its order, marking each node's state as it goes. The
// status query shows it live; the lease's history keeps it as executed.
// What the cluster made different from the plan (it changed between the
// plan and the write) shows in the tree, never silently: an operation the
// plan did not list is added, marked as such; one it listed that had
// nothing left to do is skipped.

// notInPlan marks an operation the deploy ran that its plan did not list.
const notInPlan = " (not in the plan: the cluster changed after it was read)"

// startTree makes the tree of p, the plan of deploying m, the deploy's,
// its lease checked. A plan recorded before plans had trees gets the one
// internal/plan builds from what it read.
func (w *deployRun) startTree(p *activities.DeployPlan, m *manifest.Manifest) {
	if p.Tree != nil {
		w.tree = p.Tree.Clone()
	} else {
		w.tree = activities.Tree(p, m)
	}
	if w.rollbackTo != 0 && !w.reverting {
		w.tree.Text = fmt.Sprintf("roll back lease %s to deploy #%d", m.Lease, w.rollbackTo)
	}
	flow.SetState(w.tree, plan.Running, nil)
	w.nodes = map[string]*plan.Node{}
	if n := w.tree.ByOp(plan.OpCheckLease); len(n) > 0 {
		flow.SetState(n[0], plan.Done, nil)
	}
}

// skip marks n skipped: why, it had nothing left to do.
func (w *deployRun) skip(n *plan.Node, why error) { flow.SetState(n, plan.Skipped, why) }

// markStep marks step done (or failed with err) and its operations by
// what ran, matched by identity (operation and target, never by text):
// done, or skipped as there was nothing left to do; an operation that ran
// but was not in the plan is added, marked so.
func (w *deployRun) markStep(step *plan.Node, ran []*plan.Node, err error) {
	type id struct {
		op     plan.Op
		target string
	}
	ranSet := map[id]bool{}
	for _, n := range ran {
		ranSet[id{n.Op, n.Target}] = true
	}
	planned := map[id]bool{}
	for _, c := range step.Children {
		planned[id{c.Op, c.Target}] = true
		switch {
		case ranSet[id{c.Op, c.Target}]:
			flow.SetState(c, plan.Done, nil)
		case err == nil:
			w.skip(c, errors.New("nothing left to do"))
		}
	}
	for _, n := range ran {
		if !planned[id{n.Op, n.Target}] {
			n = n.Clone()
			n.Text += notInPlan
			flow.SetState(n, plan.Done, nil)
			step.Add(n)
		}
	}
	if err != nil {
		flow.SetState(step, plan.Failed, errors.New(flow.ErrorMessage(err)))
		return
	}
	flow.SetState(step, plan.Done, nil)
}

// texts are the nodes' texts, as the lease's history lists operations.
func texts(nodes []*plan.Node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.Text)
	}
	return out
}

// serviceNode finds the deploy's node for a service's change (w.nodes):
// the plan's, or, if the plan did not have it, one added and marked so.
func (w *deployRun) serviceNode(change plan.ServiceChange) {
	want := plan.Service(change)
	if n := w.tree.Find(want.Op, change.Service); n != nil {
		w.nodes[change.Service] = n
		return
	}
	want.Text += notInPlan
	// Before the release step: the tree stays in execution order.
	last := len(w.tree.Children) - 1
	if last >= 0 && w.tree.Children[last].Op == plan.OpRelease {
		w.tree.Children = append(w.tree.Children[:last], want, w.tree.Children[last])
	} else {
		w.tree.Add(want)
	}
	w.nodes[change.Service] = want
}

// markRollout marks svc's rollout node by how its RolloutWorkflow ended,
// and a canary's steps by how far they got.
func (w *deployRun) markRollout(svc string, res api.RolloutResult, err error) {
	n := w.nodes[svc]
	if n == nil {
		return
	}
	var appErr *temporal.ApplicationError
	if err != nil && errors.As(err, &appErr) && appErr.HasDetails() {
		var failed api.RolloutResult
		if appErr.Details(&failed) == nil {
			res = failed
		}
	}
	switch {
	case err != nil:
		flow.SetState(n, plan.Failed, errors.New(flow.ErrorMessage(err)))
	case res.UndoneTo != 0:
		flow.SetState(n, plan.Failed, fmt.Errorf("an operator undid it: back to revision %d", res.UndoneTo))
	default:
		flow.SetState(n, plan.Done, nil)
	}
	markSteps(n.ByOp(plan.OpCanaryStep), res.Canary, res.UndoneTo, err)
	for _, bg := range n.ByOp(plan.OpBackground) {
		switch {
		case res.Canary == nil:
		case res.Canary.BackgroundFailed != "":
			flow.SetState(bg, plan.Failed, errors.New(res.Canary.BackgroundFailed))
		default:
			flow.SetState(bg, plan.Done, nil)
		}
	}
	markSteps(n.ByOp(plan.OpBlueGreenStep), res.BlueGreen, res.UndoneTo, err)
}

// markSteps marks a canary's or a blue-green's steps by how far they got.
func markSteps(steps []*plan.Node, got *api.StepsResult, undoneTo int64, err error) {
	for i, s := range steps {
		switch {
		case got == nil:
			// The rollout ran no steps (nothing stable to compare with).
			if err == nil {
				flow.SetState(s, plan.Skipped, errors.New("not run: nothing stable to compare with, or a return to the last-known-good manifest"))
			}
		case i < got.Completed:
			flow.SetState(s, plan.Done, nil)
		case got.PromotedFull > 0:
			flow.SetState(s, plan.Skipped, fmt.Errorf("promote --full at step %d", got.PromotedFull))
		case i == got.Completed && undoneTo != 0:
			flow.SetState(s, plan.Failed, fmt.Errorf("undone: back to revision %d", undoneTo))
		case err != nil && i == got.Completed && got.Reason != "":
			flow.SetState(s, plan.Failed, errors.New(got.Reason))
		}
	}
}

// endTree marks the deploy done, or failed with err; what it did not reach
// is skipped. It returns the executed tree.
func (w *deployRun) endTree(err error) *plan.Node {
	t := w.tree
	if t == nil {
		return nil
	}
	if err != nil {
		flow.SetState(t, plan.Failed, errors.New(flow.ErrorMessage(err)))
	} else {
		flow.SetState(t, plan.Done, nil)
	}
	t.Walk(func(x *plan.Node, _ int) { // what it did not reach
		if x.State == plan.Pending || x.State == plan.Running || x.State == "" {
			flow.SetState(x, plan.Skipped, nil)
		}
	})
	return t
}
