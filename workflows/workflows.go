// Package workflows is deployflow's workflows, one package each, as
// upstream has one package per controller:
//
//   - lease: a lease's deploys (DeployWorkflow), its plan (PlanWorkflow)
//     and its schedules (ScheduledDeployWorkflow);
//   - rollout: one service's rollout (RolloutWorkflow), a child of its
//     lease's workflow;
//   - stateful: a stateful service's rollout through its StatefulSet's
//     partition (StatefulSetRolloutWorkflow), a child of its lease's
//     workflow;
//   - placement: one deploy across many clusters (PlacementWorkflow);
//   - internal/flow: what they share: the version gates, activity
//     options, the one function that marks a plan node's state and the
//     one analysis runner.
//
// Their contract (IDs, names, inputs, statuses) is package api: a
// workflow starts another by its name there, never by its function, so
// no workflow's package imports another's. This package only lists them
// for the worker and the replayer.
package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/workflows/lease"
	"github.com/deployflow/deployflow/workflows/placement"
	"github.com/deployflow/deployflow/workflows/rollout"
	"github.com/deployflow/deployflow/workflows/stateful"
)

// Register puts every workflow on r (a worker, or a replayer of recorded
// histories) under its name in the contract.
//
// Under Worker Versioning each workflow type has a deliberate behaviour: a
// rollout is pinned (it finishes on the build that started it: its
// decisions and the ReplicaSets it names come from one code), while a
// lease's workflow, schedules and plans auto-upgrade to the current build
// (a lease's workflow continues as new after every deploy, and its changes
// are version-gated and replay-tested). Unversioned workers ignore it.
func Register(r worker.WorkflowRegistry) {
	for _, wf := range []struct {
		fn        any
		name      string
		behaviour workflow.VersioningBehavior
	}{
		{rollout.RolloutWorkflow, api.RolloutWorkflow, workflow.VersioningBehaviorPinned},
		{stateful.StatefulSetRolloutWorkflow, api.StatefulSetRolloutWorkflow, workflow.VersioningBehaviorPinned},
		{lease.DeployWorkflow, api.DeployWorkflow, workflow.VersioningBehaviorAutoUpgrade},
		{lease.ScheduledDeployWorkflow, api.ScheduledDeployWorkflow, workflow.VersioningBehaviorAutoUpgrade},
		{lease.PlanWorkflow, api.PlanWorkflow, workflow.VersioningBehaviorAutoUpgrade},
		{placement.PlacementWorkflow, api.PlacementWorkflow, workflow.VersioningBehaviorPinned},
	} {
		r.RegisterWorkflowWithOptions(wf.fn, workflow.RegisterOptions{Name: wf.name, VersioningBehavior: wf.behaviour})
	}
}
