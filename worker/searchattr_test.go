package main_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/searchattr"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Guards 8.8: a worker on a Temporal namespace without deployflow's search
// attributes started anyway, and every lease workflow's task then failed,
// forever, on the first upsert. It now refuses to start and names them, or
// registers them with --register-search-attributes.
func TestWorkerChecksItsSearchAttributesAtStart(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := testenv.ShortName("sa")
	_, err := env.Temporal.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := env.Temporal.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
		return err == nil
	}, 2*time.Minute, 200*time.Millisecond, "namespace %s never served", ns)

	w := startWorker(t, env, testenv.Name(t, "tq"), freeAddr(t), "--temporal-namespace", ns)
	select {
	case err := <-w.exited:
		assert.Error(t, err, "the worker must not start")
	case <-time.After(2 * time.Minute):
		t.Fatal("the worker started on a namespace without deployflow's search attributes")
	}
	logs := w.logs.String()
	assert.Contains(t, logs, "lacks deployflow's search attributes DeployflowLease=Keyword")
	assert.Contains(t, logs, "temporal operator search-attribute create --namespace "+ns+" --name DeployflowLease --type Keyword")

	addr := freeAddr(t)
	startWorker(t, env, testenv.Name(t, "tq"), addr, "--temporal-namespace", ns, "--register-search-attributes")
	require.Eventually(t, func() bool { return get("http://"+addr+"/readyz") == "ok\n" }, 3*time.Minute, 200*time.Millisecond,
		"the worker never became ready after registering the attributes")
	missing, err := searchattr.Missing(ctx, env.Temporal.OperatorService(), ns)
	require.NoError(t, err)
	assert.Empty(t, missing)
}

// The search-attribute command of "Install in a cluster" in
// docs/install.md, run as written (on a new namespace instead of default),
// is all a Temporal namespace needs for the worker to start.
func TestTheInstallDocsSearchAttributeCommandLetsTheWorkerStart(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	page, err := os.ReadFile("../docs/install.md")
	require.NoError(t, err)
	section := string(page)
	start := strings.Index(section, "## Install in a cluster")
	require.GreaterOrEqual(t, start, 0, "docs/install.md has an Install in a cluster section")
	section = section[start:]
	i := strings.Index(section, "temporal operator search-attribute create")
	require.GreaterOrEqual(t, i, 0, "docs/install.md's Install in a cluster section shows the temporal operator search-attribute create command")
	var command []string
	for _, line := range strings.Split(section[i:], "\n") {
		command = append(command, strings.TrimSuffix(strings.TrimSpace(line), "\\"))
		if !strings.HasSuffix(strings.TrimSpace(line), "\\") {
			break
		}
	}
	args := strings.Fields(strings.Join(command, " "))
	require.Equal(t, []string{"temporal", "operator", "search-attribute", "create", "--namespace", "default"}, args[:6])

	ns := testenv.ShortName("docs-sa")
	_, err = env.Temporal.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	require.NoError(t, err)
	args[5] = ns
	var out []byte
	require.Eventually(t, func() bool {
		out, err = exec.Command(env.Stack.Bin(devstack.Temporal), append(args[1:], "--address", devstack.TemporalAddress)...).CombinedOutput()
		return err == nil
	}, 2*time.Minute, 500*time.Millisecond, "the command of docs/install.md: %s", out)

	addr := freeAddr(t)
	startWorker(t, env, testenv.Name(t, "tq"), addr, "--temporal-namespace", ns)
	require.Eventually(t, func() bool { return get("http://"+addr+"/readyz") == "ok\n" }, 3*time.Minute, 200*time.Millisecond,
		"the worker never became ready after the command of docs/install.md")
}
