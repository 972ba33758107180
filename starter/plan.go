package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/app"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/kube"
	"github.com/deployflow/deployflow/workflows"
)

// computePlan runs the deploy chain's planning activity in-process, from the
// live cluster: the same code the lease's workflow runs before it writes.
func computePlan(ctx context.Context, g *globals, m *manifest.Manifest) (*activities.DeployPlan, error) {
	if g.cfg.Kubeconfig == "" {
		return nil, usageError{errors.New("--plan reads the cluster: set KUBECONFIG or --kubeconfig")}
	}
	rc, err := kube.RESTConfig(g.cfg.Kubeconfig, "deployflow-cli")
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	pool, err := g.cfg.Pool()
	if err != nil {
		return nil, usageError{err}
	}
	acts := app.Activities(kc, dyn, pool, g.cfg.Blocked(), nil)
	l, err := acts.CheckLease(ctx, m.Lease)
	if err != nil {
		return nil, err
	}
	return acts.PlanDeploy(ctx, activities.PlanInput{Manifest: *m, Owner: l.Owner})
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
	fmt.Fprintln(w, "operations, in order:")
	if len(p.Operations) == 0 {
		fmt.Fprintln(w, "  (none: the lease already runs this manifest)")
	}
	for i, op := range p.Operations {
		fmt.Fprintf(w, "  %2d. %s\n", i+1, op)
	}
	fmt.Fprintf(w, "summary: %s (plan %s)\n", p.Summary, p.Fingerprint)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// approveWhenReady waits until the lease's plan awaits approval and
// approves it.
func approveWhenReady(ctx context.Context, c client.Client, lease string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := queryDeploy(ctx, c, lease)
		if err == nil && st.Phase == workflows.PhaseAwaitingApproval && st.Plan != nil {
			return approve(ctx, c, lease, st.Plan.Fingerprint)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("lease %s: no plan awaited approval within 2 minutes", lease)
}

func approve(ctx context.Context, c client.Client, lease, fingerprint string) error {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.DeployWorkflowID(lease), UpdateName: workflows.UpdateApprove,
		Args: []any{workflows.ApproveRequest{Fingerprint: fingerprint}}, WaitForStage: client.WorkflowUpdateStageCompleted,
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
func runApprove(ctx context.Context, args []string, stdout io.Writer) error {
	var g globals
	fs := newFlags("approve", &g)
	fingerprint := fs.String("plan", "", "the fingerprint of the plan you reviewed (refused if another plan awaits)")
	pos, err := g.parse(fs, args)
	if err != nil {
		return err
	}
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
