package flow

import "github.com/deployflow/deployflow/internal/plan"

// Where a plan node's state changes (issue 36.1). The deploy's tree (with
// its rollouts' steps) and the placement's are the plans `deployflow
// deploy --plan` prints; as each operation runs, SetState, and only it
// (TestOneFunctionSetsNodeStates), says how far it got: pending, running,
// then done, failed or skipped, why being the failure's or the skip's
// reason. The status query shows the tree live, the lease's history keeps
// it as executed.
func SetState(n *plan.Node, s plan.State, why error) {
	if n == nil {
		return
	}
	n.Mark(s, why)
}
