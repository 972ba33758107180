package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/k8s/kube"
)

// globals are the flags every command shares: connection settings and -o.
type globals struct {
	cfg    config.Config
	output string
	fs     *flag.FlagSet
}

func newFlags(name string, g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	g.cfg.RegisterFlags(fs)
	fs.StringVar(&g.output, "o", "text", "output: text or json")
	fs.SetOutput(os.Stderr)
	return fs
}

// parse parses args; flags may come before or after the positional ones.
func (g *globals) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if err := g.cfg.Validate(); err != nil {
		return nil, usageError{err}
	}
	if g.output != "text" && g.output != "json" {
		return nil, usageError{fmt.Errorf("-o %q: want text or json", g.output)}
	}
	return pos, nil
}

func (g *globals) temporal(ctx context.Context) (client.Client, error) {
	c, err := client.DialContext(ctx, client.Options{
		HostPort: g.cfg.TemporalAddress, Namespace: g.cfg.TemporalNamespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (%v): start it with 'make dev-up' or set --temporal-address", g.cfg.TemporalAddress, err)
	}
	return c, nil
}

func (g *globals) leases() (lease.Store, error) {
	if g.cfg.Kubeconfig == "" && os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, usageError{fmt.Errorf("no cluster: set KUBECONFIG or --kubeconfig (for the local stack: eval \"$(bin/devstack env)\")")}
	}
	rc, err := kube.RESTConfig(g.cfg.Kubeconfig, "deployflow-cli")
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return lease.NewKubeStore(dyn), nil
}

// workflowURL links a workflow in the Temporal Web UI. The UI's address is
// DEPLOYFLOW_UI_URL, by default the dev server's.
func workflowURL(cfg config.Config, id, runID string) string {
	base := strings.TrimSuffix(os.Getenv("DEPLOYFLOW_UI_URL"), "/")
	if base == "" {
		base = "http://127.0.0.1:8233"
	}
	url := fmt.Sprintf("%s/namespaces/%s/workflows/%s", base, cfg.TemporalNamespace, id)
	if runID != "" {
		url += "/" + runID + "/history"
	}
	return url
}
