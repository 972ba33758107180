package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Operator controls, like `kubectl rollout pause|resume|undo|restart` and
// `kubectl scale`. pause, resume, abort and undo act on a service's rollout
// in progress; scale and restart go through the lease's workflow (they
// change what the lease runs) and roll out from there.
func runPause(g *globals, fs *flag.FlagSet) runner {
	return rolloutControl(g, fs, "pause", api.UpdatePause, nil)
}

func runResume(g *globals, fs *flag.FlagSet) runner {
	return rolloutControl(g, fs, "resume", api.UpdateResume, nil)
}

func runAbort(g *globals, fs *flag.FlagSet) runner {
	rollout := rolloutControl(g, fs, "abort", api.UpdateAbort, nil)
	return func(ctx context.Context, pos []string, out io.Writer) error {
		if len(pos) == 1 {
			if err := noClusterOnPlacement(fs, "abort"); err != nil {
				return err
			}
			return placementControl(ctx, g, "abort", api.UpdateAbort, pos[0], out)
		}
		return rollout(ctx, pos, out)
	}
}

// noClusterOnPlacement refuses --cluster on a placement's control: a
// placement spans its clusters.
func noClusterOnPlacement(fs *flag.FlagSet, name string) error {
	if f := fs.Lookup("cluster"); f != nil && f.Value.String() != "" {
		return usageError{fmt.Errorf("--cluster: %s <lease> acts on the lease's placement, in all its clusters; %s <lease> <service> --cluster %s acts on one rollout there", name, name, f.Value.String())}
	}
	return nil
}

// runPromote is `deployflow promote <lease> <service> [--full]`: a canary
// goes on past its pause or analysis, or (--full) skips every step left;
// `deployflow promote <lease>`: a placement's held wave goes on.
func runPromote(g *globals, fs *flag.FlagSet) runner {
	full := fs.Bool("full", false, "skip every remaining canary step (the rollout still respects maxSurge/maxUnavailable)")
	rollout := rolloutControl(g, fs, "promote", api.UpdatePromote, func() any { return api.PromoteRequest{Full: *full} })
	return func(ctx context.Context, pos []string, out io.Writer) error {
		if len(pos) == 1 { // a placement's held wave
			if err := noClusterOnPlacement(fs, "promote"); err != nil {
				return err
			}
			return placementControl(ctx, g, "promote", api.UpdatePromote, pos[0], out)
		}
		return rollout(ctx, pos, out)
	}
}

func runUndo(g *globals, fs *flag.FlagSet) runner {
	rev := fs.Int64("to-revision", 0, "the revision to go back to (0: the previous one)")
	return rolloutControl(g, fs, "undo", api.UpdateUndo, func() any { return api.UndoRequest{ToRevision: *rev} })
}

// rolloutControl sends update (with arg's value, if any) to the rollout of
// <lease> <service>, in the cluster --cluster names.
func rolloutControl(g *globals, fs *flag.FlagSet, name, update string, arg func() any) runner {
	clusterName := clusterFlag(fs)
	return func(ctx context.Context, pos []string, out io.Writer) error {
		if len(pos) != 2 {
			return usageError{fmt.Errorf("usage: deployflow %s <lease> <service> [--cluster NAME]", name)}
		}
		lease, svc := pos[0], pos[1]
		cluster, err := g.clusterOf(*clusterName)
		if err != nil {
			return err
		}
		c, err := g.temporal(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		opts := client.UpdateWorkflowOptions{
			WorkflowID: rolloutIn(ctx, c, cluster, manifest.Namespace(lease), svc), UpdateName: update,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		}
		if arg != nil {
			opts.Args = []any{arg()}
		}
		h, err := updateWorkflow(ctx, c, opts)
		var st api.RolloutStatus
		if err == nil {
			err = h.Get(ctx, &st)
		}
		if err != nil {
			return fmt.Errorf("%s %s of lease %s%s: %w (%s acts on a rollout in progress: see 'deployflow status %s --watch%s')", name, svc, lease, inCluster(cluster), err, name, lease, clusterArg(cluster))
		}
		fmt.Fprintf(out, "%s of lease %s%s: %s\n", svc, lease, inCluster(cluster), st.Message)
		return nil
	}
}

// runScale is `deployflow scale <lease> <service> N`.
func runScale(g *globals, fs *flag.FlagSet) runner {
	cluster := clusterFlag(fs)
	return func(ctx context.Context, pos []string, out io.Writer) error {
		if len(pos) != 3 {
			return usageError{errors.New("usage: deployflow scale <lease> <service> <replicas> [--cluster NAME]")}
		}
		n, err := strconv.ParseInt(pos[2], 10, 32)
		if err != nil {
			return usageError{fmt.Errorf("replicas %q: give a whole number", pos[2])}
		}
		return leaseUpdate(ctx, g, *cluster, pos[0], api.UpdateScale,
			api.ScaleServiceRequest{Service: pos[1], Replicas: int32(n)}, out,
			fmt.Sprintf("scaling %s of lease %s to %d", pos[1], pos[0], n))
	}
}

// runRestart is `deployflow restart <lease>`.
func runRestart(g *globals, fs *flag.FlagSet) runner {
	cluster := clusterFlag(fs)
	return func(ctx context.Context, pos []string, out io.Writer) error {
		if len(pos) != 1 {
			return usageError{errors.New("usage: deployflow restart <lease> [--cluster NAME]")}
		}
		return leaseUpdate(ctx, g, *cluster, pos[0], api.UpdateRestart, nil, out, "restarting every pod of lease "+pos[0])
	}
}

// runRetry is `deployflow retry <lease>`.
func runRetry(g *globals, fs *flag.FlagSet) runner {
	cluster := clusterFlag(fs)
	return func(ctx context.Context, pos []string, out io.Writer) error {
		if len(pos) != 1 {
			return usageError{errors.New("usage: deployflow retry <lease> [--cluster NAME]")}
		}
		return leaseUpdate(ctx, g, *cluster, pos[0], api.UpdateRetry, nil, out, "retrying the failed deploy of lease "+pos[0])
	}
}

// runRollback returns a lease to a recorded successful deploy (issue
// 37.4): its manifest deployed again, each service's ReplicaSet of it
// scaled back up.
func runRollback(g *globals, fs *flag.FlagSet) runner {
	cluster := clusterFlag(fs)
	to := fs.Int64("to", 0, "the deploy to return to (its revision in deployflow history); default: the one before the deploy running")
	return func(ctx context.Context, pos []string, out io.Writer) error {
		if len(pos) != 1 {
			return usageError{errors.New("usage: deployflow rollback <lease> [--to N] [--cluster NAME]")}
		}
		if *to < 0 {
			return usageError{fmt.Errorf("--to %d: give a deploy's revision (deployflow history)", *to)}
		}
		what := "rolling lease " + pos[0] + " back to the deploy before the one running"
		if *to > 0 {
			what = fmt.Sprintf("rolling lease %s back to deploy #%d", pos[0], *to)
		}
		return leaseUpdate(ctx, g, *cluster, pos[0], api.UpdateRollback, api.RollbackRequest{To: *to}, out, what)
	}
}

// runReject marks a deploy that no retry, schedule, placement return or
// rollback deploys again (issue 37.4).
func runReject(g *globals, fs *flag.FlagSet) runner {
	cluster := clusterFlag(fs)
	return func(ctx context.Context, pos []string, out io.Writer) error {
		if len(pos) != 2 {
			return usageError{errors.New("usage: deployflow reject <lease> <revision> [--cluster NAME]")}
		}
		n, err := strconv.ParseInt(pos[1], 10, 64)
		if err != nil || n < 1 {
			return usageError{fmt.Errorf("revision %q: give a deploy's revision, a positive number (deployflow history)", pos[1])}
		}
		return leaseUpdate(ctx, g, *cluster, pos[0], api.UpdateReject, api.RejectRequest{Revision: n}, out,
			fmt.Sprintf("deploy #%d of lease %s rejected: no retry, schedule, placement return or rollback deploys it again", n, pos[0]))
	}
}

func leaseUpdate(ctx context.Context, g *globals, clusterName, lease, update string, arg any, out io.Writer, done string) error {
	cluster, err := g.clusterOf(clusterName)
	if err != nil {
		return err
	}
	c, err := g.temporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	opts := client.UpdateWorkflowOptions{
		WorkflowID: api.DeployWorkflowIDIn(lease, cluster), UpdateName: update, WaitForStage: client.WorkflowUpdateStageCompleted,
	}
	if arg != nil {
		opts.Args = []any{arg}
	}
	h, err := updateWorkflow(ctx, c, opts)
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("lease %s%s: %w", lease, inCluster(cluster), err)
	}
	fmt.Fprintf(out, "%s%s (deployflow status %s --watch%s)\n", done, inCluster(cluster), lease, clusterArg(cluster))
	return nil
}

// rolloutID is the ID of the running rollout of namespace/service. A rollout
// started before IDs were joined by workflows.IDSeparator runs under its
// legacy ID, which another lease's rollout could share: it is used only when
// the new ID has no running workflow and the legacy one's status names this
// very namespace and service.
func rolloutID(ctx context.Context, c client.Client, namespace, service string) string {
	id := api.RolloutWorkflowID(namespace, service)
	if d, err := c.DescribeWorkflowExecution(ctx, id, ""); err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return id
	}
	legacy := api.LegacyRolloutWorkflowID(namespace, service)
	v, err := c.QueryWorkflow(ctx, legacy, "", api.QueryStatus)
	var st api.RolloutStatus
	if err == nil && v.Get(&st) == nil && st.Namespace == namespace && st.Service == service {
		return legacy
	}
	return id
}
