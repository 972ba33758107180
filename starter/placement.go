package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// A manifest with a placement (issue 23) deploys through the lease's
// placement workflow (placement-<lease>): wave by wave, each cluster's
// deploy by the lease's workflow of that cluster.

// deployPlacement is `deployflow deploy -f m.yaml` for a manifest with a
// placement: --plan prints its waves as the tree the workflow executes.
func deployPlacement(ctx context.Context, g *globals, c client.Client, m *manifest.Manifest, planOnly, yes, wait bool, out io.Writer) error {
	tree := api.PlacementTree(m)
	if planOnly {
		if g.output == "json" && !yes {
			return json.NewEncoder(out).Encode(tree)
		}
		tree.Format(out, false)
		if !yes {
			return nil
		}
		fmt.Fprintln(out)
	}
	id := api.PlacementWorkflowID(m.Lease)
	var run client.WorkflowRun
	err := retryTemporal(ctx, "start the placement of lease "+m.Lease, func() error {
		var err error
		run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: id, TaskQueue: g.cfg.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:            "place lease " + m.Lease,
		}, api.PlacementWorkflow, api.PlacementInput{Manifest: *m, Trigger: "cli"})
		return err
	})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return fmt.Errorf("lease %s: a placement is in progress; follow it with 'deployflow status %s', or stop it with 'deployflow abort %s'", m.Lease, m.Lease, m.Lease)
	}
	if err != nil {
		return fmt.Errorf("place lease %s: %w", m.Lease, err)
	}
	if g.output == "text" {
		fmt.Fprintf(out, "placement of lease %s started (workflow %s)\n  %s\n", m.Lease, id, workflowURL(g.cfg, id, run.GetRunID()))
	}
	if !wait {
		return nil
	}
	var st api.PlacementStatus
	err = run.Get(ctx, &st)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == api.ErrPlacement {
		_ = appErr.Details(&st)
	} else if err != nil {
		return fmt.Errorf("placement of lease %s: %w", m.Lease, err)
	}
	if g.output == "json" {
		if err := json.NewEncoder(out).Encode(st); err != nil {
			return err
		}
	} else {
		printPlacement(out, st)
	}
	if st.Phase != api.PlacementSucceeded {
		return fmt.Errorf("placement of lease %s ended %s: %s", m.Lease, st.Phase, st.Error)
	}
	return nil
}

// printPlacement is a placement's tree, each operation with its state.
func printPlacement(out io.Writer, st api.PlacementStatus) {
	fmt.Fprintf(out, "placement of lease %s: %s\n", st.Lease, st.Phase)
	if st.Error != "" {
		fmt.Fprintf(out, "  %s\n", st.Error)
	}
	if st.Tree != nil {
		st.Tree.Format(out, true)
	}
	for i, w := range st.Waves {
		for _, c := range w.Clusters {
			line := fmt.Sprintf("  wave %d, cluster %s: %s", i+1, c.Cluster, c.Phase)
			if c.Revision > 0 {
				line += fmt.Sprintf(" (deploy %d: %s)", c.Revision, c.Outcome)
			}
			if !c.Finished.IsZero() && !c.Started.IsZero() {
				line += fmt.Sprintf(" in %s", c.Finished.Sub(c.Started).Round(100*time.Millisecond))
			}
			if c.Reverted != "" {
				line += "; " + c.Reverted
			}
			fmt.Fprintln(out, line)
		}
	}
}

// queryPlacement is the lease's placement, if it has one.
func queryPlacement(ctx context.Context, c client.Client, lease string) (api.PlacementStatus, bool) {
	var st api.PlacementStatus
	v, err := c.QueryWorkflow(ctx, api.PlacementWorkflowID(lease), "", api.QueryStatus)
	if err != nil || v.Get(&st) != nil {
		return st, false
	}
	return st, true
}

// placementControl is `deployflow abort <lease>` and `deployflow promote
// <lease>`: an abort stops the placement, and every cluster that moved
// returns to its last-known-good manifest; a promote lets a held wave (its
// approval, an inconclusive analysis) go on.
func placementControl(ctx context.Context, g *globals, name, update, lease string, out io.Writer) error {
	c, err := g.temporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := updateWorkflow(ctx, c, client.UpdateWorkflowOptions{
		WorkflowID: api.PlacementWorkflowID(lease), UpdateName: update,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("%s the placement of lease %s: %w (%s <lease> acts on a placement in progress; %s <lease> <service> on a rollout)", name, lease, err, name, name)
	}
	switch update {
	case api.UpdateAbort:
		fmt.Fprintf(out, "placement of lease %s: aborting; every cluster that moved returns to its last-known-good manifest ('deployflow status %s')\n", lease, lease)
	default:
		fmt.Fprintf(out, "placement of lease %s: promoted; the held wave goes on ('deployflow status %s')\n", lease, lease)
	}
	return nil
}
