package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/config"
)

// Another cluster's lease workflow and rollouts (issue 23): the commands
// that act on a lease's workflow or a service's rollout take --cluster,
// the cluster as placements name it; without it, or with the worker's own
// cluster's name (--cluster-name), they act on the worker's own cluster.

// clusterFlag adds --cluster to a command's flags.
func clusterFlag(fs *flag.FlagSet) *string {
	return fs.String("cluster", "", "the cluster whose lease workflow or rollout to act on, as placements name it (e.g. eu-1); empty or the worker's own cluster's name (--cluster-name): the worker's own")
}

// clusterOf is the cluster a --cluster value names: "" for the worker's own.
func (g *globals) clusterOf(name string) (string, error) {
	if name == "" || name == g.cfg.ClusterName {
		return "", nil
	}
	if err := config.CheckClusterName(name); err != nil {
		return "", usageError{fmt.Errorf("--cluster: %w", err)}
	}
	return name, nil
}

// rolloutIn is the ID of the running rollout of namespace/service in
// cluster ("" the worker's own).
func rolloutIn(ctx context.Context, c client.Client, cluster, namespace, service string) string {
	if cluster == "" {
		return rolloutID(ctx, c, namespace, service)
	}
	return api.ClusterRolloutWorkflowID(cluster, namespace, service)
}

// inCluster says where a lease workflow runs, for messages.
func inCluster(cluster string) string {
	if cluster == "" {
		return ""
	}
	return " in cluster " + cluster
}

// clusterArg is the --cluster flag as the CLI's own hints repeat it.
func clusterArg(cluster string) string {
	if cluster == "" {
		return ""
	}
	return " --cluster " + cluster
}

// watchPlacement redraws a lease's placement until it ends: nil when it
// succeeded, an error when it failed or was aborted. A wave held for
// approval is shown as held, and the watch goes on (a human promotes).
func watchPlacement(ctx context.Context, c client.Client, lease string, out io.Writer, interval time.Duration) error {
	screen := newFrames(out)
	for {
		st, ok := queryPlacement(ctx, c, lease)
		if !ok {
			return fmt.Errorf("lease %s: no placement answers (is one running? 'deployflow deploy -f manifest.yaml')", lease)
		}
		var b strings.Builder
		printPlacement(&b, st)
		screen.draw(b.String())
		switch st.Phase {
		case api.PlacementSucceeded:
			return nil
		case api.PlacementFailed, api.PlacementAborted:
			return fmt.Errorf("placement of lease %s ended %s: %s", lease, st.Phase, st.Error)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
