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

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/manifest"
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
	// Limits are the operator's bounds on one lease (--max-*): a wave's
	// analysis is held to them.
	Limits manifest.Limits
	// ReservedPrefixes, AllowedPodKeys: the pod keys a wave's analysis Job
	// may not use, as a service's (--reserved-key-prefixes,
	// --allow-pod-keys; nil prefixes: manifest.DefaultReservedPrefixes).
	ReservedPrefixes, AllowedPodKeys []string
}

// Register puts the placement activities on w under their names.
func (f *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(f.ListClusters, activity.RegisterOptions{Name: api.ActivityListClusters})
	w.RegisterActivityWithOptions(f.ReadCluster, activity.RegisterOptions{Name: api.ActivityReadCluster})
	w.RegisterActivityWithOptions(f.DeployToCluster, activity.RegisterOptions{Name: api.ActivityDeployToCluster})
	w.RegisterActivityWithOptions(f.CheckPlacement, activity.RegisterOptions{Name: api.ActivityCheckPlacement})
}

// CheckPlacement refuses a manifest over the operator's limits, its waves'
// analyses included, naming each field.
func (f *Activities) CheckPlacement(_ context.Context, m manifest.Manifest) error {
	err := errors.Join(m.CheckLimits(f.Limits), m.CheckReservedKeys(f.ReservedPrefixes, f.AllowedPodKeys))
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidManifest, nil)
	}
	return nil
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
	return api.DeployWorkflowIDIn(lease, cluster), config.ClusterTaskQueue(f.TaskQueue, cluster), cluster
}

// ReadCluster is the lease's state in a cluster: its last-known-good
// manifest, none if the lease has no workflow there.
func (f *Activities) ReadCluster(ctx context.Context, ref api.ClusterRef) (api.ClusterState, error) {
	id, _, _ := f.target(ref.Lease, ref.Cluster)
	st, found, err := f.status(ctx, id)
	if err != nil || !found {
		return api.ClusterState{}, err
	}
	return api.ClusterState{LastGood: st.LastGood}, nil
}

func (f *Activities) status(ctx context.Context, id string) (api.DeployStatus, bool, error) {
	var st api.DeployStatus
	v, err := f.Temporal.QueryWorkflow(ctx, id, "", api.QueryStatus)
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
func (f *Activities) DeployToCluster(ctx context.Context, in api.ClusterDeployInput) (api.ClusterDeployResult, error) {
	id, queue, cluster := f.target(in.Manifest.Lease, in.Cluster)
	poll := f.Poll
	if poll <= 0 {
		poll = time.Second
	}
	// Whether an attempt sent the update is in the heartbeats, so a retry
	// after a worker's death knows it too.
	var hb progress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &hb)
	}
	for {
		st, found, err := f.status(ctx, id)
		if err != nil {
			hb.Status = err.Error()
			activity.RecordHeartbeat(ctx, hb)
		} else {
			if found {
				for _, rec := range st.History {
					if rec.Key == in.Key {
						return api.ClusterDeployResult{Revision: rec.Revision, Outcome: rec.Outcome,
							Succeeded: strings.HasPrefix(rec.Outcome, "Succeeded")}, nil
					}
				}
			}
			running := found && st.DeployingKey == in.Key
			switch {
			case running:
				if closed, err := f.closed(ctx, id); err == nil && closed {
					// Its run ended (a teardown, the lease gone) before the deploy.
					return api.ClusterDeployResult{}, temporal.NewNonRetryableApplicationError(
						fmt.Sprintf("cluster %s: the lease's workflow there ended (%s) before this placement's deploy ran", in.Cluster, st.Phase), api.ErrClusterDeploy, nil)
				}
			case hb.Sent:
				return api.ClusterDeployResult{}, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("cluster %s: another deploy of lease %s superseded this placement's", in.Cluster, in.Manifest.Lease), api.ErrClusterDeploy, nil)
			case in.IfLast != "" && movedOn(st, found, in.IfLast) != "":
				return api.ClusterDeployResult{MovedOn: true, Outcome: movedOn(st, found, in.IfLast)}, nil
			default:
				if err := f.send(ctx, id, queue, cluster, in); err != nil {
					var appErr *temporal.ApplicationError
					if errors.As(err, &appErr) && appErr.Type() == api.ErrNotLastDeploy {
						// Another deploy landed between the check above and the return.
						return api.ClusterDeployResult{MovedOn: true, Outcome: "deployed again since the placement's deploy"}, nil
					}
					return api.ClusterDeployResult{}, err
				}
				hb.Sent = true
				activity.RecordHeartbeat(ctx, hb)
				continue
			}
			hb.Status = st.Phase
			activity.RecordHeartbeat(ctx, hb)
		}
		select {
		case <-ctx.Done():
			return api.ClusterDeployResult{}, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// movedOn says why a return guarded by ifLast (the placement's deploy's
// key) must not be sent to a cluster, "" if it may: the deploy the cluster
// runs now is the placement's (interrupted in flight: the return
// supersedes it), or its last deploy is and no other deploy runs or waits.
func movedOn(st api.DeployStatus, found bool, ifLast string) string {
	if !found {
		return "the lease has no workflow there"
	}
	if st.DeployingKey == ifLast {
		return ""
	}
	last, seen := "", false
	for _, rec := range st.History {
		last, seen = rec.Key, seen || rec.Key == ifLast
	}
	busy := st.DeployingKey != "" || st.Pending || st.Phase == api.PhaseDeploying || st.Phase == api.PhaseAwaitingApproval
	switch {
	case last == ifLast && !busy:
		return ""
	case seen:
		return "deployed again since the placement's deploy"
	default:
		return "the placement's deploy never reached it"
	}
}

// progress is what DeployToCluster heartbeats: whether the update was
// sent, and the cluster's lease phase.
type progress struct {
	Sent   bool   `json:"sent"`
	Status string `json:"status,omitempty"`
}

// closed reports whether the lease workflow's latest run has ended.
func (f *Activities) closed(ctx context.Context, id string) (bool, error) {
	d, err := f.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return false, err
	}
	return d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// send is the "deploy" update of the cluster's lease workflow, started if
// it does not run; the update's ID is the key (a resend is the same one).
// A start carries the key too: if the update is lost (the new run's first
// workflow task failed), the run's own deploy of its input is the keyed
// one, and a resent update repeating the key changes nothing.
func (f *Activities) send(ctx context.Context, id, queue, cluster string, in api.ClusterDeployInput) error {
	start := f.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: id, TaskQueue: queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "deploy lease " + in.Manifest.Lease + " to cluster " + in.Cluster,
	}, api.DeployWorkflow, api.DeployInput{Manifest: in.Manifest, Trigger: "placement", Cluster: cluster, Key: in.Key})
	h, err := f.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateID: in.Key, WorkflowID: id, UpdateName: api.UpdateDeploy,
			Args:         []any{api.DeployRequest{Manifest: in.Manifest, Trigger: "placement", Key: in.Key, IfLast: in.IfLast}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		if appErr.Type() == api.ErrNotLastDeploy || strings.Contains(appErr.Error(), "ifLast: lease ") {
			return temporal.NewNonRetryableApplicationError(appErr.Error(), api.ErrNotLastDeploy, nil)
		}
		// The lease's workflow there refused the manifest (its validator).
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("cluster %s refused the deploy: %s", in.Cluster, appErr.Error()), api.ErrClusterDeploy, nil)
	}
	return err
}
