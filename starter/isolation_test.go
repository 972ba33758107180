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
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
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

// Guards the deploy's retries: each attempt of the Update-with-Start had
// reused the first attempt's start operation, which Temporal's client uses
// once, so a deploy whose first attempt met a transient error (CI run 62:
// WorkflowNotReady, a workflow task timed out on a loaded machine) failed
// at once with "was already executed" instead of trying again. Here the
// transient error is a namespace that never appears: the deploy retries
// until --temporal-retry, and says so.
func TestADeployRetriesItsUpdateWithStart(t *testing.T) {
	testenv.Get(t) // a live test: the namespace is refused by the stack's Temporal (it failed make unit with the stack down)
	file := filepath.Join(t.TempDir(), "m.yaml")
	require.NoError(t, os.WriteFile(file, []byte("lease: retry\nservices:\n  - name: web\n    image: nginx:1.27\n"), 0o644))
	code, _, stderr := runCLI("deploy", "-f", file, "--temporal-address", devstack.TemporalAddress,
		"--temporal-namespace", testenv.ShortName("never"), "--temporal-retry", "3s")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "deployflow: waiting for Temporal to deploy lease retry (attempt 2)")
	assert.Contains(t, stderr, "gave up after 3s")
	assert.NotContains(t, stderr, "already executed")
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
		_ = env.Temporal.TerminateWorkflow(context.Background(), api.RolloutWorkflowID(ns, "web"), "", "test over")
	})
	code, stdout, stderr := runCLI(append([]string{"rollout", "--service", "web", "--image", "nginx:1.27"}, args...)...)
	assert.Equal(t, 1, code, stdout)
	assert.Contains(t, stderr, "a rollout of "+ns+"/web is already running")
	assert.Contains(t, stderr, "nothing was started for nginx:1.27")
}

// Guards 8.1 during an upgrade: a rollout started under its legacy ID
// (rollout-<namespace>-<service>) by an older lease workflow is still
// reached by `deployflow pause` of its own lease, and never by the pause of
// the other lease whose names join to that same legacy ID.
func TestControlsReachALegacyRolloutOnlyOfTheirOwnLease(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	tq := env.Worker(t)
	a := testenv.ShortName("leg")
	b := a + "-b" // lease a / service b-c and lease a-b / service c share the legacy ID
	nsB := manifest.Namespace(b)
	_, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: nsB, Labels: map[string]string{manifest.ManagedByLabel: manifest.ManagedBy}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), nsB, metav1.DeleteOptions{}) })

	legacy := api.LegacyRolloutWorkflowID(nsB, "c")
	require.Equal(t, api.LegacyRolloutWorkflowID(manifest.Namespace(a), "b-c"), legacy)
	in := api.RolloutInput{Namespace: nsB, Service: "c"}
	two := int32(2)
	in.Deployment.Spec.Replicas = &two
	in.Deployment.Spec.Template.Annotations = map[string]string{"deployflow.dev/ready-after": "60s"}
	in.Deployment.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "nginx:1.27"}}
	_, err = env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: legacy, TaskQueue: tq}, api.RolloutWorkflow, in)
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Temporal.TerminateWorkflow(context.Background(), legacy, "", "test over") })
	status := func() api.RolloutStatus {
		var st api.RolloutStatus
		require.Eventually(t, func() bool {
			v, err := env.Patient().QueryWorkflow(ctx, legacy, "", api.QueryStatus)
			return err == nil && v.Get(&st) == nil && st.Step != ""
		}, 2*time.Minute, 100*time.Millisecond)
		return st
	}
	require.False(t, status().Paused)

	args := []string{"--temporal-address", devstack.TemporalAddress, "--task-queue", tq}
	code, _, _ := runCLI(append([]string{"pause", a, "b-c"}, args...)...)
	assert.Equal(t, 1, code, "lease a has no rollout of b-c")
	assert.False(t, status().Paused, "lease a's pause must not reach lease a-b's rollout")

	code, stdout, stderr := runCLI(append([]string{"pause", b, "c"}, args...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "paused")
	assert.True(t, status().Paused, "lease a-b's own pause reaches its legacy rollout")
}
