package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
)

// runDeploy is `deployflow deploy -f manifest.yaml [--wait]`: one command
// that starts the lease's workflow or, if it runs, hands it the manifest
// (Update-with-Start).
func runDeploy(g *globals, fs *flag.FlagSet) runner {
	file := fs.String("f", "", "the manifest (YAML or JSON); - for standard input")
	wait := fs.Bool("wait", false, "wait until the deploy has finished; exit 1 if it failed")
	planOnly := fs.Bool("plan", false, "print what the deploy would change, computed from the live cluster, and change nothing")
	yes := fs.Bool("yes", false, "with --plan: deploy after printing the plan (and approve it if the manifest requires approval)")
	return func(ctx context.Context, _ []string, stdout io.Writer) error {
		if *file == "" {
			return usageError{errors.New("-f: give the manifest to deploy (YAML or JSON; - for standard input)")}
		}
		data, err := readFile(*file)
		if err != nil {
			return usageError{fmt.Errorf("-f: %w", err)}
		}
		m, err := manifest.Parse(data)
		if err != nil {
			return usageError{fmt.Errorf("%s is not a valid manifest; nothing was deployed:\n%w", *file, err)}
		}
		if m.HasSecrets() && g.cfg.CodecKeysFile == "" {
			// Sent without the codec, its secret values would be written
			// into Temporal in plain text (issue 37.3).
			return usageError{fmt.Errorf("%s has secrets (credentials or secretEnv), and this CLI has no codec keys (--codec-keys-file, DEPLOYFLOW_CODEC_KEYS_FILE) to encrypt them: nothing was sent", *file)}
		}

		c, err := g.temporal(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		if m.Placement != nil {
			return deployPlacement(ctx, g, c, m, *planOnly, *yes, *wait, stdout)
		}
		var approved string // the fingerprint of the plan printed and approved with --yes
		if *planOnly {
			plan, err := computePlan(ctx, g, c, m)
			if err != nil {
				return err
			}
			approved = plan.Fingerprint
			if g.output == "json" && !*yes {
				return json.NewEncoder(stdout).Encode(plan)
			}
			printPlan(stdout, plan)
			if !*yes {
				return nil
			}
			fmt.Fprintln(stdout)
		}

		id := api.DeployWorkflowID(m.Lease)
		run, accepted, err := sendDeploy(ctx, c, g.cfg.TaskQueue, m, approved)
		if err != nil {
			return err
		}
		link := workflowURL(g.cfg, id, "")
		if g.output == "text" {
			fmt.Fprintf(stdout, "deploy of lease %s accepted (workflow %s)\n  %s\n", m.Lease, run.GetID(), link)
		}
		switch {
		case approved != "" && g.output == "text":
			fmt.Fprintf(stdout, "approved plan %s: the deploy runs only if its plan is still this one\n", approved)
		case m.RequireApproval && g.output == "text":
			fmt.Fprintf(stdout, "the manifest requires approval: review the plan with 'deployflow status %s -o json' and run 'deployflow approve %s --plan <fingerprint>'\n", m.Lease, m.Lease)
		}
		if !*wait {
			if g.output == "json" {
				return json.NewEncoder(stdout).Encode(accepted)
			}
			return nil
		}
		wctx := ctx // bounded by --timeout
		if g.output == "text" {
			// Progress as a tree, redrawn as the rollouts move.
			if err := watchStatus(wctx, c, m.Lease, "", stdout, 500*time.Millisecond); err != nil && wctx.Err() != nil {
				return err
			}
		}
		st, err := waitDeploy(wctx, c, m.Lease, accepted.Revision)
		if err != nil {
			return err
		}
		if g.output == "json" {
			if err := json.NewEncoder(stdout).Encode(st); err != nil {
				return err
			}
		} else {
			printStatus(stdout, st)
		}
		if st.Phase != api.PhaseActive {
			return fmt.Errorf("deploy of lease %s ended %s: %s", m.Lease, st.Phase, st.LastError)
		}
		return nil
	}
}

func readFile(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

// waitDeploy polls the lease's status until a deploy after revision has
// finished (the workflow continues as new after each deploy, so it follows
// the newest run).
func waitDeploy(ctx context.Context, c client.Client, lease string, revision int64) (api.DeployStatus, error) {
	var st api.DeployStatus
	for {
		if s, err := queryDeploy(ctx, c, lease, ""); err == nil {
			st = s
			if n := len(st.History); n > 0 && st.History[n-1].Revision > revision && !st.Pending && st.Phase != api.PhaseDeploying {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("lease %s: still %s after waiting: %w (follow it with 'deployflow status %s')", lease, st.Phase, ctx.Err(), lease)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// runStatus is `deployflow status <lease>`.
func runStatus(g *globals, fs *flag.FlagSet) runner {
	watch := fs.Bool("watch", false, "redraw until no deploy (or placement) is in progress; exit 0 when Active (Succeeded), 1 when it failed")
	interval := fs.Duration("interval", 500*time.Millisecond, "with --watch: how often to redraw")
	clusterName := clusterFlag(fs)
	return func(ctx context.Context, pos []string, stdout io.Writer) error {
		if len(pos) != 1 {
			return usageError{errors.New("usage: deployflow status <lease> [--cluster NAME] [--watch]")}
		}
		cluster, err := g.clusterOf(*clusterName)
		if err != nil {
			return err
		}
		c, err := g.temporal(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		if *clusterName != "" {
			return clusterStatus(ctx, g, c, pos[0], cluster, *watch, *interval, stdout)
		}
		pl, placed := queryPlacement(ctx, c, pos[0])
		if *watch && g.output == "text" {
			if placed && (pl.Phase == api.PlacementDeploying || pl.Phase == api.PlacementRevertingP) {
				return watchPlacement(ctx, c, pos[0], stdout, *interval)
			}
			return watchStatus(ctx, c, pos[0], "", stdout, *interval)
		}
		if placed && g.output == "json" {
			return json.NewEncoder(stdout).Encode(pl)
		}
		if placed {
			printPlacement(stdout, pl)
			fmt.Fprintln(stdout)
		}
		st, err := queryDeploy(ctx, c, pos[0], "")
		if err != nil {
			if placed {
				return nil // placed in other clusters only
			}
			return err
		}
		return printLease(ctx, g, c, st, "", stdout)
	}
}

// clusterStatus is `deployflow status <lease> --cluster NAME [--watch]`: the
// lease's workflow in that cluster.
func clusterStatus(ctx context.Context, g *globals, c client.Client, lease, cluster string, watch bool, interval time.Duration, stdout io.Writer) error {
	if watch && g.output == "text" {
		return watchStatus(ctx, c, lease, cluster, stdout, interval)
	}
	st, err := queryDeploy(ctx, c, lease, cluster)
	if err != nil {
		return err
	}
	return printLease(ctx, g, c, st, cluster, stdout)
}

// printLease prints a lease workflow's status (cluster "" the worker's
// own), with where each canary and blue-green in progress is.
func printLease(ctx context.Context, g *globals, c client.Client, st api.DeployStatus, cluster string, stdout io.Writer) error {
	if g.output == "json" {
		return json.NewEncoder(stdout).Encode(st)
	}
	var rollouts map[string]api.RolloutStatus
	if st.Phase == api.PhaseDeploying {
		rollouts = rolloutStatuses(ctx, c, cluster, st)
		liveSteps(st.Tree, rollouts)
	}
	if cluster != "" {
		fmt.Fprintf(stdout, "cluster %s\n", cluster)
	}
	printStatus(stdout, st)
	// A deploy in progress: where each of its canaries and blue-greens is.
	for _, svc := range st.Services {
		r, ok := rollouts[svc]
		switch {
		case !ok:
		case r.Canary != nil:
			fmt.Fprintf(stdout, "  %s: canary %s (weight %d%%; steps: %s)\n", svc, r.Canary.Summary, r.Canary.Weight, strings.Join(r.Canary.List, " → "))
		case r.BlueGreen != nil:
			fmt.Fprintf(stdout, "  %s: blue-green %s (active selects %s, preview %s)\n", svc, r.BlueGreen.Summary, orNone(r.BlueGreen.Active), orNone(r.BlueGreen.Preview))
		}
	}
	fmt.Fprintf(stdout, "  %s\n", workflowURL(g.cfg, api.DeployWorkflowIDIn(st.Lease, cluster), ""))
	return nil
}

// runTeardown is `deployflow teardown <lease>`.
func runTeardown(g *globals, fs *flag.FlagSet) runner {
	return func(ctx context.Context, pos []string, stdout io.Writer) error {
		if len(pos) != 1 {
			return usageError{errors.New("usage: deployflow teardown <lease>")}
		}
		c, err := g.temporal(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		h, err := updateWorkflow(ctx, c, client.UpdateWorkflowOptions{
			WorkflowID: api.DeployWorkflowID(pos[0]), UpdateName: api.UpdateTeardown,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		if err != nil {
			return fmt.Errorf("teardown of lease %s: %w", pos[0], err)
		}
		fmt.Fprintf(stdout, "lease %s is being torn down: workloads, then IPs and hostnames\n", pos[0])
		return nil
	}
}

func printStatus(w io.Writer, st api.DeployStatus) {
	fmt.Fprintf(w, "lease %s (owner %s): %s, deploy #%d\n", st.Lease, st.Owner, st.Phase, st.Revision)
	if st.LastError != "" {
		fmt.Fprintf(w, "  last error: %s\n", st.LastError)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(st.Classes) > 0 {
		svcs := make([]string, 0, len(st.Classes))
		for s := range st.Classes {
			svcs = append(svcs, s)
		}
		sort.Strings(svcs)
		fmt.Fprintln(tw, "  SERVICE\tCHANGE")
		for _, s := range svcs {
			fmt.Fprintf(tw, "  %s\t%s\n", s, st.Classes[s])
		}
	}
	_ = tw.Flush()
	if len(st.Hostnames) > 0 {
		fmt.Fprintf(w, "  hostnames: %s\n", strings.Join(st.Hostnames, ", "))
	}
	for _, h := range st.Withheld {
		fmt.Fprintf(w, "  withheld: %s (held by your lease %s)\n", h.Hostname, h.Lease)
	}
	if len(st.IPs) > 0 {
		eps := make([]string, 0, len(st.IPs))
		for e, ip := range st.IPs {
			eps = append(eps, e+"="+ip)
		}
		sort.Strings(eps)
		fmt.Fprintf(w, "  IPs: %s\n", strings.Join(eps, ", "))
	}
	if n := len(st.History); n > 0 {
		r := st.History[n-1]
		fmt.Fprintf(w, "  last deploy #%d (%s): %s in %s\n", r.Revision, r.Trigger, r.Outcome, r.Finished.Sub(r.Started).Round(100*time.Millisecond))
	}
	if st.Tree != nil && (st.Phase == api.PhaseDeploying || st.Phase == api.PhaseAwaitingApproval) {
		// The deploy in progress: its plan's tree, each operation's state.
		fmt.Fprintln(w, "  deploy in progress:")
		var b strings.Builder
		st.Tree.Format(&b, true)
		for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			fmt.Fprintln(w, "    "+l)
		}
	}
}

// liveSteps marks the steps of the tree's running rollouts by where their
// RolloutWorkflows are (the lease's workflow learns it only when they end):
// the steps before the current one done, the current one running.
func liveSteps(tree *plan.Node, rollouts map[string]api.RolloutStatus) {
	if tree == nil {
		return
	}
	for svc, r := range rollouts {
		n := tree.Find(plan.OpRollOut, svc)
		if n == nil || n.State != plan.Running {
			continue
		}
		var current int
		var steps []*plan.Node
		switch {
		case r.Canary != nil:
			current, steps = r.Canary.Step, n.ByOp(plan.OpCanaryStep)
		case r.BlueGreen != nil:
			current, steps = r.BlueGreen.Step, n.ByOp(plan.OpBlueGreenStep)
		default:
			continue
		}
		for i, step := range steps {
			switch {
			case i+1 < current:
				step.Mark(plan.Done, nil)
			case i+1 == current:
				step.Mark(plan.Running, nil)
			}
		}
	}
}

// sendDeploy hands the manifest to the lease's workflow, starting the
// workflow if it does not run (Update-with-Start), and waits for its
// answer: the deploy accepted (its status then) or refused. Temporal's
// transient errors are retried under one update ID, so an attempt the
// server took while its caller saw an error is joined by the next, never
// run as a second deploy; among them, the SDK's long poll ending before a
// loaded worker took the update ("Timeout or cancellation waiting for
// update": the soak's deploys failed on it in CI runs 87 and 88).
func sendDeploy(ctx context.Context, c client.Client, taskQueue string, m *manifest.Manifest, approved string) (client.WorkflowRun, api.DeployStatus, error) {
	id := api.DeployWorkflowID(m.Lease)
	updateID := uuid.NewString()
	var start client.WithStartWorkflowOperation
	var accepted api.DeployStatus
	var refused error
	err := retryTemporal(ctx, "deploy lease "+m.Lease, func() error {
		// A start operation is used once: each attempt has its own (a
		// retry of the first failed with "was already executed" when
		// Temporal answered WorkflowNotReady: CI run 62).
		start = c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: id, TaskQueue: taskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			StaticSummary:            "deploy lease " + m.Lease,
		}, api.DeployWorkflow, api.DeployInput{Manifest: *m, Trigger: "cli"})
		h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{
				WorkflowID: id, UpdateName: api.UpdateDeploy, UpdateID: updateID,
				Args:         []any{api.DeployRequest{Manifest: *m, Trigger: "cli", PlanFingerprint: approved}},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		if err != nil {
			return err
		}
		refused = nil
		if err := h.Get(ctx, &accepted); err != nil {
			if transient(err) {
				return err
			}
			refused = err // the workflow's answer: not retried
		}
		return nil
	})
	if err != nil {
		return nil, accepted, fmt.Errorf("deploy lease %s: %w", m.Lease, err)
	}
	if refused != nil {
		return nil, accepted, fmt.Errorf("lease %s refused the manifest: %w", m.Lease, refused)
	}
	run, err := start.Get(ctx)
	if err != nil {
		return nil, accepted, err
	}
	return run, accepted, nil
}
