package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/deployflow/deployflow/api"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"golang.org/x/term"
)

// watchStatus redraws the lease's tree until no deploy is in progress, like
// `kubectl rollout status`: nil when the lease is Active, an error when the
// deploy failed (a progress deadline included).
func watchStatus(ctx context.Context, c client.Client, lease, cluster string, out io.Writer, interval time.Duration) error {
	screen := newFrames(out)
	for {
		st, err := queryDeploy(ctx, c, lease, cluster)
		if err != nil {
			return err
		}
		screen.draw(renderTree(st, rolloutStatuses(ctx, c, cluster, st)))
		if st.Phase != api.PhaseDeploying && !st.Pending && st.Phase != "" {
			switch st.Phase {
			case api.PhaseActive:
				return nil
			default:
				return fmt.Errorf("lease %s%s is %s: %s", lease, inCluster(cluster), st.Phase, st.LastError)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// queryDeploy is the status of the lease's workflow in cluster ("" the
// worker's own).
// frames draws a watch's successive frames, each only when it changed: on
// a terminal over the last one, elsewhere after it, a blank line between.
type frames struct {
	out  io.Writer
	tty  bool
	last string
}

func newFrames(out io.Writer) *frames {
	f := &frames{out: out}
	if file, ok := out.(*os.File); ok {
		f.tty = term.IsTerminal(int(file.Fd()))
	}
	return f
}

func (f *frames) draw(frame string) {
	if frame == f.last {
		return
	}
	if f.tty {
		fmt.Fprint(f.out, "\033[H\033[2J")
	} else if f.last != "" {
		fmt.Fprintln(f.out)
	}
	fmt.Fprint(f.out, frame)
	f.last = frame
}

func queryDeploy(ctx context.Context, c client.Client, lease, cluster string) (api.DeployStatus, error) {
	var st api.DeployStatus
	var v converter.EncodedValue
	err := retryTemporal(ctx, "answer the status of lease "+lease+inCluster(cluster), func() error {
		var err error
		v, err = c.QueryWorkflow(ctx, api.DeployWorkflowIDIn(lease, cluster), "", api.QueryStatus)
		return err
	})
	if err != nil {
		if why := explainNotReady(ctx, c, api.DeployWorkflowIDIn(lease, cluster), err); why != err {
			return st, fmt.Errorf("lease %s%s: %w", lease, inCluster(cluster), why)
		}
		return st, fmt.Errorf("lease %s%s: %w (is it deployed? 'deployflow deploy -f manifest.yaml')", lease, inCluster(cluster), err)
	}
	return st, v.Get(&st)
}

// rolloutStatuses asks each service's running rollout for its status.
func rolloutStatuses(ctx context.Context, c client.Client, cluster string, st api.DeployStatus) map[string]api.RolloutStatus {
	out := map[string]api.RolloutStatus{}
	for _, svc := range st.Services {
		if class := st.Classes[svc]; class != "rollout" && class != "scale-only" {
			continue // nothing rolls; its last rollout is history
		}
		v, err := c.QueryWorkflow(ctx, rolloutIn(ctx, c, cluster, st.Namespace, svc), "", api.QueryStatus)
		if err != nil {
			continue // no rollout of this service, or it has finished
		}
		var rs api.RolloutStatus
		if v.Get(&rs) == nil {
			out[svc] = rs
		}
	}
	return out
}

// renderTree draws lease → service → ReplicaSets → step and conditions.
func renderTree(st api.DeployStatus, rollouts map[string]api.RolloutStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lease %s (owner %s) — %s, deploy #%d", st.Lease, st.Owner, st.Phase, st.Revision)
	if st.Pending {
		b.WriteString(", another deploy queued")
	}
	b.WriteString("\n")
	services := append([]string(nil), st.Services...)
	sort.Strings(services)
	for i, svc := range services {
		branch, indent := "├─", "│  "
		if i == len(services)-1 {
			branch, indent = "└─", "   "
		}
		class := st.Classes[svc]
		if class == "" {
			class = "pending"
		}
		fmt.Fprintf(&b, "%s %s: %s\n", branch, svc, class)
		r, ok := rollouts[svc]
		if !ok {
			continue
		}
		lines := []string{}
		for _, rs := range r.ReplicaSets {
			if rs.Desired == 0 && rs.Current == 0 && !rs.New {
				continue
			}
			mark := ""
			if rs.New {
				mark = "  ← new"
			}
			lines = append(lines, fmt.Sprintf("rev %d %s %s  desired %d  ready %d  available %d%s",
				rs.Revision, rs.Name, rs.Image, rs.Desired, rs.Ready, rs.Available, mark))
		}
		step := "step " + r.Step
		if r.Paused {
			step += " (paused)"
		}
		for _, c := range r.Conditions {
			step += fmt.Sprintf(" · %s=%s %s", c.Type, c.Status, c.Reason)
		}
		lines = append(lines, step)
		if c := r.Canary; c != nil {
			lines = append(lines, fmt.Sprintf("canary %s (weight %d%%; steps: %s)", c.Summary, c.Weight, strings.Join(c.List, " → ")))
		}
		if bg := r.BlueGreen; bg != nil {
			lines = append(lines, fmt.Sprintf("blue-green %s (active selects %s, preview %s)", bg.Summary, orNone(bg.Active), orNone(bg.Preview)))
		}
		if r.Message != "" {
			lines = append(lines, r.Message)
		}
		for j, l := range lines {
			sub := "├─"
			if j == len(lines)-1 {
				sub = "└─"
			}
			fmt.Fprintf(&b, "%s%s %s\n", indent, sub, l)
		}
	}
	if st.LastError != "" && st.Phase != api.PhaseDeploying {
		fmt.Fprintf(&b, "last error: %s\n", st.LastError)
	}
	return b.String()
}
