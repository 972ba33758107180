package lease

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/config"
)

// Which cluster a lease's workflow deploys to (issue 23.1). A worker with
// --clusters polls one task queue per cluster, <task queue>@<cluster>,
// whose activities (local ones too) reach that cluster only; a lease's
// deploys to cluster NAME are the workflow DeployWorkflowIDIn(lease, NAME)
// on that queue, and its rollouts run there as its children. A workflow
// of the default cluster ("") is today's, unchanged.

// checkCluster refuses a lease workflow whose cluster, ID and task queue
// disagree: started on another cluster's queue, it would deploy the lease
// where its input does not say.
func checkCluster(ctx workflow.Context, in deployInput) error {
	if in.Manifest.Placement != nil {
		return fmt.Errorf("manifest.placement: a lease's workflow deploys to one cluster; a manifest with a placement deploys through 'deployflow deploy', which starts the lease's placement workflow (%s)", api.PlacementWorkflowID(in.Manifest.Lease))
	}
	info := workflow.GetInfo(ctx)
	if in.Cluster == "" {
		// The worker's own cluster, as ever (its queue is not looked at: a
		// run that predates clusters replays whatever its queue's name).
		if _, cluster, ok := api.LeaseOfWorkflowID(info.WorkflowExecution.ID); ok && cluster != "" {
			return fmt.Errorf("cluster: empty, but workflow %s deploys to cluster %s: set \"cluster\": %q and start it on that cluster's task queue, <worker's task queue>@%s",
				info.WorkflowExecution.ID, cluster, cluster, cluster)
		}
		return nil
	}
	_, queueCluster, _ := strings.Cut(info.TaskQueueName, "@")
	if err := config.CheckClusterName(in.Cluster); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	// A lease workflow's ID names its cluster. (Any other ID is let
	// through: a replayer runs histories under an ID of its own.)
	if lease, cluster, ok := api.LeaseOfWorkflowID(info.WorkflowExecution.ID); ok && (lease != in.Manifest.Lease || cluster != in.Cluster) {
		return fmt.Errorf("cluster: lease %s's deploys to cluster %s run as workflow %s, not %s", in.Manifest.Lease, in.Cluster,
			api.DeployWorkflowIDIn(in.Manifest.Lease, in.Cluster), info.WorkflowExecution.ID)
	}
	if queueCluster != in.Cluster {
		return fmt.Errorf("cluster: lease %s's deploys to cluster %s run on task queue <worker's task queue>@%s (the worker's --clusters), not %s",
			in.Manifest.Lease, in.Cluster, in.Cluster, info.TaskQueueName)
	}
	return nil
}
