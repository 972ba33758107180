package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/testenv"
	"github.com/deployflow/deployflow/workflows"
)

// Guards 8.7: `deploy --plan` computed the plan in the CLI with the CLI's own
// configuration, so a hostname the worker blocks showed up as deployable.
// The plan now comes from a worker, with the worker's configuration.
func TestThePlanIsComputedByTheWorker(t *testing.T) {
	env, tq, lease := newLease(t, "wplan")
	cli(t, env, tq, "lease", "create", lease, "--owner", "acme")
	file := filepath.Join(t.TempDir(), "m.yaml")
	// testenv's workers block forbidden.example.com; this CLI blocks nothing.
	require.NoError(t, os.WriteFile(file, []byte("lease: "+lease+"\nservices:\n  - name: web\n    image: nginx:1.27\n"+
		"    ports: [{port: 80, expose: {http: {hostnames: [forbidden.example.com]}}}]\n"), 0o644))
	code, _, stderr := runCLI("deploy", "-f", file, "--plan", "--temporal-address", devstack.TemporalAddress, "--task-queue", tq, "--blocked-hostnames", "")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "HostnameBlocked")
	assert.Contains(t, stderr, "forbidden.example.com")
}

// Guards 8.9: under load one `deploy --wait` failed at start with the
// server's transient "Namespace default is not found" and did not retry.
// Here the namespace appears 15 seconds after the CLI first asks, past the
// SDK's own short retries.
func TestTheCLIRetriesTransientTemporalErrors(t *testing.T) {
	env := testenv.Get(t)
	ns := testenv.ShortName("cli-retry")
	go func() {
		time.Sleep(15 * time.Second)
		_, _ = env.Temporal.WorkflowService().RegisterNamespace(context.Background(), &workflowservice.RegisterNamespaceRequest{
			Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	}()
	code, _, stderr := runCLI("status", "nobody", "--temporal-address", devstack.TemporalAddress, "--temporal-namespace", ns)
	assert.Equal(t, 1, code, "the lease is not deployed: %s", stderr)
	assert.Contains(t, stderr, "deployflow: waiting for Temporal to answer the status of lease nobody")
	assert.Contains(t, stderr, "workflow not found", "the final answer is the lease's, not the namespace's")

	// Bounded: a namespace that never appears fails after --temporal-retry.
	code, _, stderr = runCLI("status", "nobody", "--temporal-address", devstack.TemporalAddress, "--temporal-namespace", ns+"-never", "--temporal-retry", "2s")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "gave up after 2s")
}

// Guards 8.4: `deployflow rollout` with a new image for a service whose
// rollout was running attached to it and reported success for the old
// desired state.
func TestRolloutRefusesToAttachToAnotherDesiredState(t *testing.T) {
	env := testenv.Get(t)
	ns, tq := env.Namespace(t), env.Worker(t)
	file := filepath.Join(t.TempDir(), "d.yaml")
	require.NoError(t, os.WriteFile(file, []byte("metadata: {name: web}\nspec:\n  replicas: 2\n  template:\n    metadata:\n      annotations: {deployflow.dev/ready-after: 30s}\n"+
		"    spec:\n      containers: [{name: web, image: nginx:1.26}]\n"), 0o644))
	args := []string{"--temporal-address", devstack.TemporalAddress, "--task-queue", tq, "--namespace", ns}
	code, _, stderr := runCLI(append([]string{"rollout", "-f", file, "--wait=false"}, args...)...)
	require.Equal(t, 0, code, stderr)
	t.Cleanup(func() {
		_ = env.Temporal.TerminateWorkflow(context.Background(), workflows.RolloutWorkflowID(ns, "web"), "", "test over")
	})
	code, stdout, stderr := runCLI(append([]string{"rollout", "--service", "web", "--image", "nginx:1.27"}, args...)...)
	assert.Equal(t, 1, code, stdout)
	assert.Contains(t, stderr, "a rollout of "+ns+"/web is already running")
	assert.Contains(t, stderr, "nothing was started for nginx:1.27")
}
