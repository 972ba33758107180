package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// computePlan asks a worker for the plan (PlanWorkflow): the deploy
// chain's own planning code, with the worker's configuration (blocked
// hostnames, IP pool), read from the live cluster. Nothing is written.
func computePlan(ctx context.Context, g *globals, c client.Client, m *manifest.Manifest) (*activities.DeployPlan, error) {
	var run client.WorkflowRun
	err := retryTemporal(ctx, "start the plan of lease "+m.Lease, func() error {
		var err error
		run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: api.PlanWorkflowID(*m), TaskQueue: g.cfg.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			WorkflowExecutionTimeout: 2 * time.Minute,
			StaticSummary:            "plan lease " + m.Lease,
		}, api.PlanWorkflow, api.PlanRequest{Manifest: *m})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("plan lease %s: %w", m.Lease, err)
	}
	var plan activities.DeployPlan
	if err := run.Get(ctx, &plan); err != nil {
		return nil, fmt.Errorf("plan lease %s: %w", m.Lease, err)
	}
	return &plan, nil
}

func printPlan(w io.Writer, p *activities.DeployPlan) {
	fmt.Fprintf(w, "plan for lease %s (owner %s):\n", p.Lease, p.Owner)
	for _, s := range p.Services {
		change := s.Class
		switch s.Class {
		case activities.ChangeRollout:
			change = fmt.Sprintf("rollout  %s → %s", orNone(s.CurrentImage), s.DesiredImage)
		case activities.ChangeScale:
			change = fmt.Sprintf("scale    %d → %d replicas", s.CurrentReplicas, s.DesiredReplicas)
		}
		fmt.Fprintf(w, "  %-12s %s\n", s.Service, change)
	}
	for _, h := range p.Withheld {
		fmt.Fprintf(w, "  withheld: %s (held by your lease %s)\n", h.Hostname, h.Lease)
	}
	if len(p.Operations) == 0 {
		fmt.Fprintln(w, "nothing to change: the lease already runs this manifest")
	}
	switch {
	case p.Tree != nil:
		// The tree the lease's workflow executes, node by node, in order.
		fmt.Fprintln(w, "the deploy, as the lease's workflow will execute it:")
		p.Tree.Format(w, false)
	default: // a worker from before the tree
		fmt.Fprintln(w, "operations, in order:")
		for i, op := range p.Operations {
			fmt.Fprintf(w, "  %2d. %s\n", i+1, op)
		}
	}
	fmt.Fprintf(w, "summary: %s (plan %s)\n", p.Summary, p.Fingerprint)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func approve(ctx context.Context, c client.Client, lease, fingerprint string) error {
	h, err := updateWorkflow(ctx, c, client.UpdateWorkflowOptions{
		WorkflowID: api.DeployWorkflowID(lease), UpdateName: api.UpdateApprove,
		Args: []any{api.ApproveRequest{Fingerprint: fingerprint}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("approve the plan of lease %s: %w", lease, err)
	}
	return nil
}

// runApprove is `deployflow approve <lease> [--plan FINGERPRINT]`.
func runApprove(g *globals, fs *flag.FlagSet) runner {
	fingerprint := fs.String("plan", "", "the fingerprint of the plan you reviewed (refused if another plan awaits)")
	return func(ctx context.Context, pos []string, stdout io.Writer) error {
		if len(pos) != 1 {
			return usageError{errors.New("usage: deployflow approve <lease> [--plan FINGERPRINT]")}
		}
		c, err := g.temporal(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := approve(ctx, c, pos[0], *fingerprint); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "plan of lease %s approved: deploying (deployflow status %s --watch)\n", pos[0], strings.TrimSpace(pos[0]))
		return nil
	}
}
