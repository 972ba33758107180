// Package fleet holds the placement workflow's activities (issue 23.3):
// they reach Temporal, not a cluster. Each deploy of a placement to one
// cluster is the "deploy" update of the lease's workflow of that cluster,
// sent with a key, so a retried activity (a worker killed mid-wave) finds
// the deploy it started instead of deploying twice.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/workflows"
)

// DefaultSelf is the name placements give the worker's own cluster unless
// --cluster-name says another.
const DefaultSelf = "local"

// Activities deploy a placement's waves through the worker's Temporal.
type Activities struct {
	Temporal client.Client
	// TaskQueue is the worker's; a cluster's lease workflows run on
	// TaskQueue@<cluster>.
	TaskQueue string
	// Self is the worker's own cluster's name in placements; Clusters its
	// --clusters names.
	Self     string
	Clusters []string
	// Poll is how often a cluster's deploy is checked (default 1s).
	Poll time.Duration
}

// Register puts the placement activities on w under their names.
func (f *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(f.ListClusters, activity.RegisterOptions{Name: workflows.ActivityListClusters})
	w.RegisterActivityWithOptions(f.ReadCluster, activity.RegisterOptions{Name: workflows.ActivityReadCluster})
	w.RegisterActivityWithOptions(f.DeployToCluster, activity.RegisterOptions{Name: workflows.ActivityDeployToCluster})
}

// ListClusters names the clusters a placement may use: the worker's own
// first.
func (f *Activities) ListClusters(context.Context) ([]string, error) {
	return append([]string{f.self()}, f.Clusters...), nil
}

func (f *Activities) self() string {
	if f.Self == "" {
		return DefaultSelf
	}
	return f.Self
}

// target is where the lease's deploys to cluster run: its workflow ID, its
// task queue, and the cluster its input names ("" for the worker's own).
func (f *Activities) target(lease, cluster string) (id, queue, inputCluster string) {
	if cluster == f.self() {
		cluster = ""
	}
	return workflows.DeployWorkflowIDIn(lease, cluster), config.ClusterTaskQueue(f.TaskQueue, cluster), cluster
}

// ReadCluster is the lease's state in a cluster: its last-known-good
// manifest, none if the lease has no workflow there.
func (f *Activities) ReadCluster(ctx context.Context, ref workflows.ClusterRef) (workflows.ClusterState, error) {
	id, _, _ := f.target(ref.Lease, ref.Cluster)
	st, found, err := f.status(ctx, id)
	if err != nil || !found {
		return workflows.ClusterState{}, err
	}
	return workflows.ClusterState{LastGood: st.LastGood}, nil
}

func (f *Activities) status(ctx context.Context, id string) (workflows.DeployStatus, bool, error) {
	var st workflows.DeployStatus
	v, err := f.Temporal.QueryWorkflow(ctx, id, "", workflows.QueryDeploy)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("query %s: %w", id, err)
	}
	return st, true, v.Get(&st)
}

// DeployToCluster deploys in.Manifest to one cluster and waits for the
// deploy's end. Safe to retry: a deploy recorded with in.Key, or running
// with it, is the one this activity started; it is never sent twice.
func (f *Activities) DeployToCluster(ctx context.Context, in workflows.ClusterDeployInput) (workflows.ClusterDeployResult, error) {
	id, queue, cluster := f.target(in.Manifest.Lease, in.Cluster)
	poll := f.Poll
	if poll <= 0 {
		poll = time.Second
	}
	sent := false
	for {
		st, found, err := f.status(ctx, id)
		if err != nil {
			activity.RecordHeartbeat(ctx, err.Error())
		} else {
			if found {
				for _, rec := range st.History {
					if rec.Key == in.Key {
						return workflows.ClusterDeployResult{Revision: rec.Revision, Outcome: rec.Outcome,
							Succeeded: strings.HasPrefix(rec.Outcome, "Succeeded")}, nil
					}
				}
			}
			running := found && st.DeployingKey == in.Key
			switch {
			case running:
			case sent:
				return workflows.ClusterDeployResult{}, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("cluster %s: another deploy of lease %s superseded this placement's", in.Cluster, in.Manifest.Lease), workflows.ErrClusterDeploy, nil)
			default:
				if err := f.send(ctx, id, queue, cluster, in); err != nil {
					return workflows.ClusterDeployResult{}, err
				}
				sent = true
				continue
			}
			activity.RecordHeartbeat(ctx, st.Phase)
		}
		select {
		case <-ctx.Done():
			return workflows.ClusterDeployResult{}, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// send is the "deploy" update of the cluster's lease workflow, started if
// it does not run; the update's ID is the key (a resend is the same one).
func (f *Activities) send(ctx context.Context, id, queue, cluster string, in workflows.ClusterDeployInput) error {
	start := f.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: id, TaskQueue: queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "deploy lease " + in.Manifest.Lease + " to cluster " + in.Cluster,
	}, workflows.DeployWorkflow, workflows.DeployInput{Manifest: in.Manifest, Trigger: "placement", Cluster: cluster})
	h, err := f.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateID: in.Key, WorkflowID: id, UpdateName: workflows.UpdateDeploy,
			Args:         []any{workflows.DeployRequest{Manifest: in.Manifest, Trigger: "placement", Key: in.Key}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		// The lease's workflow there refused the manifest (its validator).
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("cluster %s refused the deploy: %s", in.Cluster, appErr.Error()), workflows.ErrClusterDeploy, nil)
	}
	return err
}
