package main_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/worker/testenv"
)

// The worker is SIGKILLed in the middle of a deploy and started again: the
// deploy finishes, nothing is created twice, it is recorded once (a restart
// replays; it never redeploys), and the restarted worker's /metrics shows
// deployflow's own metrics with their help text.
func TestDeploySurvivesWorkerSIGKILL(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	tq := testenv.Name(t, "tq")
	id := testenv.ShortName("lease")
	createLease(t, env, id)
	acts := env.Activities()
	first := startWorker(t, env, tq, freeAddr(t))

	six, two := int32(6), int32(2)
	host := id + ".apps.example.com"
	m := manifest.Manifest{Lease: id, Services: []manifest.Service{
		{Name: "web", Image: "nginx:1.27", Replicas: &six, PodAnnotations: map[string]string{"deployflow.dev/ready-after": "10s"},
			Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{host}}}}}},
		{Name: "api", Image: "ghcr.io/acme/api:1.0", Replicas: &two,
			Ports: []manifest.Port{{Port: 8080, Expose: &manifest.Expose{IP: "public"}}}},
	}}
	start := env.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: api.DeployWorkflowID(id), TaskQueue: tq,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, api.DeployWorkflow, api.DeployInput{Manifest: m, Trigger: "test", HealthIntervalSeconds: 1})
	h, err := env.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{WorkflowID: api.DeployWorkflowID(id), UpdateName: api.UpdateDeploy,
			Args: []any{api.DeployRequest{Manifest: m, Trigger: "test"}}, WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))

	ns := manifest.Namespace(id)
	require.Eventually(t, func() bool {
		list, err := env.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "deployflow.dev/service=web"})
		return err == nil && len(list.Items) == 1 && list.Items[0].Status.AvailableReplicas < 6
	}, 90*time.Second, 50*time.Millisecond, "the web rollout never got under way")
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	<-first.exited
	addr := freeAddr(t)
	startWorker(t, env, tq, addr)

	var st api.DeployStatus
	require.Eventually(t, func() bool {
		v, err := env.Patient().QueryWorkflow(ctx, api.DeployWorkflowID(id), "", api.QueryStatus)
		return err == nil && v.Get(&st) == nil && st.Phase == api.PhaseActive
	}, 120*time.Second, 200*time.Millisecond, "the deploy never finished after the restart (last %+v)", st)
	assert.Equal(t, int64(1), st.Revision, "the restart replayed the deploy; it did not start another")
	assert.Len(t, st.History, 1)

	count := func(n int, err error) int { require.NoError(t, err); return n }
	rss, err := env.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	assert.Equal(t, 2, count(len(rss.Items), err), "one ReplicaSet per service")
	svcs, err := env.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	assert.Equal(t, 3, count(len(svcs.Items), err), "web, api and api-ip-public")
	ings, err := env.Kube.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
	assert.Equal(t, 1, count(len(ings.Items), err))
	held, err := acts.Hostnames.Held(ctx, id)
	assert.Equal(t, []string{host}, held, err)
	ips, err := acts.IPs.Declared(ctx, id)
	assert.Len(t, ips, 1, err)

	waitLeasesGauge(t, addr, "Active", 1)
	metrics := get("http://" + addr + "/metrics")
	for _, want := range []string{
		"# HELP deployflow_deploy_steps_total ",
		`deployflow_deploy_steps_total{result="success",step="CheckLease"}`,
		"# HELP deployflow_kube_requests_total ",
		// Any verb: whether the restarted worker lists ReplicaSets itself
		// depends on where the kill fell (a rollout that only had its last
		// wait left reads the observer's cache, which watches them).
		`deployflow_kube_requests_total{code="200",resource="replicasets",verb=`,
		"# HELP deployflow_deploy_duration_seconds ",
		"# HELP deployflow_hostname_conflicts_total ",
		"# HELP deployflow_hostnames_withheld_total ",
	} {
		assert.True(t, strings.Contains(metrics, want), "/metrics lacks %q", want)
	}
}

// createLease creates an active lease of owner acme; when the test ends its
// workflow is terminated and its namespace, reservations and record go.
func createLease(t *testing.T, env *testenv.Env, id string) {
	t.Helper()
	acts := env.Activities()
	_, err := acts.Leases.Create(context.Background(), id, "acme")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Temporal.TerminateWorkflow(ctx, api.DeployWorkflowID(id), "", "test over")
		_ = acts.Hostnames.ReleaseAll(ctx, id)
		_ = acts.IPs.ReleaseAll(ctx, id)
		_ = env.Kube.CoreV1().Namespaces().Delete(ctx, manifest.Namespace(id), metav1.DeleteOptions{})
		_ = env.Dynamic.Resource(crds.Leases).Delete(ctx, id, metav1.DeleteOptions{})
	})
}
