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
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"go.uber.org/fx"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/worker/app"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck())
	}
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

// healthcheck is `deployflow-worker healthcheck`: exit 0 if the worker
// serving on DEPLOYFLOW_METRICS_ADDRESS is ready, else 1. It is the
// container's healthcheck (the image has no shell or curl).
func healthcheck() int {
	addr := config.FromEnv().MetricsAddress
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck: DEPLOYFLOW_METRICS_ADDRESS:", err)
		return 1
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort(host, port) + "/readyz")
	if err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(os.Stderr, "healthcheck: %s: %s", resp.Status, body)
		return 1
	}
	return 0
}
