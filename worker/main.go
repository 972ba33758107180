// Command deployflow-worker runs deployflow's Temporal worker: the deploy and
// rollout workflows and the activities that talk to Kubernetes. It serves
// Prometheus metrics (its own, the Temporal SDK's and Go's) on /metrics, with
// /healthz and /readyz, and stops gracefully on SIGTERM.
//
//	deployflow-worker [--temporal-address 127.0.0.1:7233] [--kubeconfig ~/.kube/config] ...
package main

import (
	"flag"
	"fmt"
	"os"

	"go.uber.org/fx"

	"github.com/deployflow/deployflow/internal/app"
	"github.com/deployflow/deployflow/internal/config"
)

func main() {
	var cfg config.Config
	fs := flag.NewFlagSet("deployflow-worker", flag.ExitOnError)
	cfg.RegisterFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if err := cfg.Resolve(); err != nil {
		fmt.Fprintln(os.Stderr, "deployflow-worker:", err)
		os.Exit(2)
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "deployflow-worker:", err)
		os.Exit(2)
	}
	// Run blocks until SIGINT or SIGTERM, then runs every stop hook: the
	// worker drains, the HTTP server shuts down, the clients close.
	fx.New(app.Module(cfg)).Run()
}
