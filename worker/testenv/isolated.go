package testenv

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/deployflow/deployflow/internal/searchattr"
)

// IsolatedNamespace is a Temporal namespace no worker but a test's own
// uses: no observer of another worker on the stack (make demo's, say) can
// reach a workflow in it. For tests that show what happens when nothing
// observes a lease.
const IsolatedNamespace = "deployflow-isolated"

// Isolated returns e with its Temporal client in IsolatedNamespace, which
// it registers (with deployflow's search attributes) if needed.
func (e *Env) Isolated(t testing.TB) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := e.Temporal.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: IsolatedNamespace, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		t.Fatalf("register Temporal namespace %s: %v", IsolatedNamespace, err)
	}
	// A new namespace takes a moment to be served everywhere.
	for {
		missing, err := searchattr.Missing(ctx, e.Temporal.OperatorService(), IsolatedNamespace)
		if err == nil && len(missing) == 0 {
			break
		}
		if err == nil {
			err = searchattr.Register(ctx, e.Temporal.OperatorService(), IsolatedNamespace, missing)
		}
		if ctx.Err() != nil {
			t.Fatalf("search attributes of Temporal namespace %s: %v", IsolatedNamespace, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	tc, err := client.NewClientFromExisting(e.Temporal, client.Options{
		Namespace: IsolatedNamespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	if err != nil {
		t.Fatalf("client of Temporal namespace %s: %v", IsolatedNamespace, err)
	}
	t.Cleanup(tc.Close)
	isolated := *e
	isolated.Temporal = tc
	return &isolated
}
