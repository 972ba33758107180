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

// Isolated returns e with its Temporal client in a Temporal namespace of
// the test's own (Env.TemporalNamespace), registered with deployflow's search
// attributes: no worker but the test's uses it, so no observer of another
// test or worker on the stack (make demo's, say) can reach a workflow in
// it. For tests that show what happens when nothing else observes a lease,
// or that count what their own workers send. (One namespace shared by
// such tests would let one's observers reach another's leases once they
// run side by side.)
func (e *Env) Isolated(t testing.TB) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := ShortName("isolated")
	_, err := e.Temporal.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		t.Fatalf("register Temporal namespace %s: %v", ns, err)
	}
	// A new namespace takes a moment to be served everywhere.
	for {
		missing, err := searchattr.Missing(ctx, e.Temporal.OperatorService(), ns)
		if err == nil && len(missing) == 0 {
			break
		}
		if err == nil {
			err = searchattr.Register(ctx, e.Temporal.OperatorService(), ns, missing)
		}
		if ctx.Err() != nil {
			t.Fatalf("search attributes of Temporal namespace %s: %v", ns, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	tc, err := client.NewClientFromExisting(e.Temporal, client.Options{
		Namespace: ns,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	if err != nil {
		t.Fatalf("client of Temporal namespace %s: %v", ns, err)
	}
	t.Cleanup(tc.Close)
	isolated := *e
	isolated.Temporal, isolated.TemporalNamespace = tc, ns
	return &isolated
}
