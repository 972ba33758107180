package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/google/uuid"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/internal/query"
	"github.com/deployflow/deployflow/k8s/kube"
)

// globals are the flags every command shares: connection settings and -o.
type globals struct {
	cfg    config.Config
	output string
	wide   bool // -o wide: text with more columns
	// temporalRetry bounds how long a call keeps retrying Temporal's
	// transient errors (--temporal-retry).
	temporalRetry time.Duration
}

func newFlags(name string, g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	g.cfg.RegisterFlags(fs)
	fs.StringVar(&g.output, "o", "text", "output: text, json, yaml or wide (text with more columns)")
	fs.StringVar(&g.output, "output", "text", "output: text, json, yaml or wide (same as -o)")
	fs.DurationVar(&g.temporalRetry, "temporal-retry", defaultTemporalRetry, "how long to retry Temporal's transient errors (unavailable, overloaded, namespace not found yet)")
	return fs
}

// validate resolves the shared settings (Temporal profile, environment)
// and checks them and -o.
func (g *globals) validate() error {
	if err := g.cfg.Resolve(); err != nil {
		return usageError{err}
	}
	if err := g.cfg.Validate(); err != nil {
		return usageError{err}
	}
	switch g.output {
	case "text", "json", "yaml":
	case "wide":
		g.output, g.wide = "text", true
	default:
		return usageError{fmt.Errorf("-o %q: want text, json, yaml or wide", g.output)}
	}
	return nil
}

func (g *globals) temporal(ctx context.Context) (client.Client, error) {
	opts, err := g.cfg.ClientOptions()
	if err != nil {
		return nil, usageError{err}
	}
	opts.Logger = sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	var c client.Client
	err = retryTemporal(ctx, "answer at "+g.cfg.TemporalAddress, func() error {
		var err error
		c, err = client.DialContext(ctx, opts)
		return err
	})
	if err != nil {
		if hint := g.cfg.DialHint(err); hint != "" {
			return nil, unreachableError{fmt.Errorf("cannot reach Temporal at %s: %s (%v)", g.cfg.TemporalAddress, hint, err)}
		}
		return nil, unreachableError{fmt.Errorf("cannot reach Temporal at %s (%v): start it with 'make dev-up' or set --temporal-address", g.cfg.TemporalAddress, err)}
	}
	// A busy lease's status is answered with its workflow's next task,
	// which a loaded server may take longer than the SDK's 10s to run.
	return query.Patient(c, opts.Namespace, opts.DataConverter), nil
}

func (g *globals) leases() (lease.Store, error) {
	rc, err := kube.RESTConfig(g.cfg.Kubeconfig, g.cfg.KubeContext, "deployflow-cli")
	if err != nil {
		return nil, unreachableError{fmt.Errorf("%w (for the local stack: eval \"$(bin/devstack env)\")", err)}
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

const defaultTemporalRetry = time.Minute

// transient reports whether err is one of Temporal's transient errors: the
// server is unavailable or overloaded, or (under load, or just after a
// namespace is registered) does not know the namespace yet, or a
// workflow's run cannot answer yet (a lease's run that just continued as
// new, before its first task), or an update not taken yet.
func transient(err error) bool {
	if config.TLSHint(err) != "" {
		return false // a TLS mismatch does not heal by waiting
	}
	var unavailable *serviceerror.Unavailable
	var exhausted *serviceerror.ResourceExhausted
	var nsNotFound *serviceerror.NamespaceNotFound
	var deadline *serviceerror.DeadlineExceeded
	var notReady *serviceerror.WorkflowNotReady
	// The SDK's wait for an update ended before a worker took it (on a
	// loaded server, or the caller's context done: retryTemporal then
	// stops): sent again under the same update ID, it is joined, not
	// taken twice.
	var updatePoll *client.WorkflowUpdateServiceTimeoutOrCanceledError
	switch {
	case errors.As(err, &unavailable), errors.As(err, &exhausted), errors.As(err, &nsNotFound), errors.As(err, &deadline), errors.As(err, &notReady),
		errors.As(err, &updatePoll):
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted:
		return true
	case codes.NotFound:
		msg := err.Error()
		return strings.Contains(msg, "Namespace") && strings.Contains(msg, "not found")
	}
	return false
}

// retrying is how a command retries Temporal's transient errors: for how
// long (--temporal-retry), and where it says what it waits for (its
// stderr). A command's context carries it (withRetrying): settings of one
// run of the command line, never the process's.
type retrying struct {
	bound    time.Duration
	progress io.Writer
}

type retryingKey struct{}

func withRetrying(ctx context.Context, r retrying) context.Context {
	return context.WithValue(ctx, retryingKey{}, r)
}

// retryTemporal runs call until it succeeds, fails with a non-transient
// error, or the context's retry bound passes, backing off exponentially
// (0.25 s to 5 s); it says on stderr what it is waiting for.
func retryTemporal(ctx context.Context, what string, call func() error) error {
	r, ok := ctx.Value(retryingKey{}).(retrying)
	if !ok {
		r = retrying{bound: defaultTemporalRetry, progress: os.Stderr}
	}
	backoff := wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5, Cap: 5 * time.Second}
	deadline := time.Now().Add(r.bound)
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil || !transient(err) {
			return err
		}
		delay := backoff.Step()
		if time.Now().Add(delay).After(deadline) {
			return fmt.Errorf("%w (gave up after %s: set --temporal-retry to wait longer)", err, r.bound)
		}
		fmt.Fprintf(r.progress, "deployflow: waiting for Temporal to %s (attempt %d): %v\n", what, attempt, err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}

// updateWorkflow sends an update, retrying Temporal's transient errors
// under one update ID: an attempt the server took although its caller saw
// an error is joined by the next, not taken again. (Each attempt had an ID
// of its own: a `deployflow retry` answered "Workflow Task in failed
// state" three times was refused at the fourth, "nothing to retry",
// because an earlier one had been taken, CI run 83.)
func updateWorkflow(ctx context.Context, c client.Client, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if opts.UpdateID == "" {
		opts.UpdateID = uuid.NewString()
	}
	var h client.WorkflowUpdateHandle
	err := retryTemporal(ctx, "take the "+opts.UpdateName+" update of "+opts.WorkflowID, func() error {
		var err error
		h, err = c.UpdateWorkflow(ctx, opts)
		return err
	})
	return h, err
}
