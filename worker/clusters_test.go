package main_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/reserve"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/worker/app"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 23.1: a worker started with --clusters deploys a lease to another
// cluster, named as a context of its kubeconfig: the lease workflow of
// that cluster (deploy-<lease>@<cluster>, on the cluster's task queue)
// creates the lease's namespace and workload there and nowhere else,
// reading the lease record from the worker's own cluster; its rollout is
// that cluster's own workflow. A lease workflow started on a queue that is
// not its cluster's is refused before it acts.
func TestAWorkerDeploysALeaseToAnotherClusterOnly(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	eu := env.Cluster(t, "it-eu") // named it-eu-N
	cluster := eu.Name
	tq := testenv.Name(t, "tq")
	metricsAddr := freeAddr(t)
	// Reached through a kubeconfig of its own, as the chart mounts one
	// from a Secret per cluster (--cluster-kubeconfigs).
	startWorker(t, env, tq, metricsAddr, "--clusters", cluster, "--cluster-kubeconfigs", cluster+"="+env.Stack.ClusterKubeconfig(cluster))

	// One observer per cluster, each one's series named by its cluster (a
	// second, unlabelled set would clash with the first in the registry).
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "/metrics lacks an observer per cluster", func() (bool, string) {
		metrics := get("http://" + metricsAddr + "/metrics")
		for _, want := range []string{`deployflow_observer_members{cluster="local"}`, `deployflow_observer_members{cluster="` + cluster + `"}`,
			`deployflow_observer_sends_total{cluster="` + cluster + `",result="accepted"}`} {
			if !strings.Contains(metrics, want) {
				return false, "no " + want
			}
		}
		return true, ""
	})

	id := testenv.ShortName("lease")
	createLease(t, env, id) // in the worker's own cluster only
	ns := manifest.Namespace(id)
	wfID := api.DeployWorkflowIDIn(id, cluster)
	t.Cleanup(func() {
		_ = env.Temporal.TerminateWorkflow(context.Background(), wfID, "", "test over")
		_ = eu.Activities.Hostnames.ReleaseAll(context.Background(), id)
		_ = eu.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	two := int32(2)
	host := id + ".apps.example.com"
	m := manifest.Manifest{Lease: id, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &two,
		Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{host}}}}}}}}

	// Started on the worker's own queue, a workflow of cluster it-eu would
	// deploy to the wrong cluster: refused, typed, nothing created.
	wrong, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wfID, TaskQueue: tq},
		api.DeployWorkflow, api.DeployInput{Manifest: m, Cluster: cluster})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = wrong.Get(wctx, nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, api.ErrInvalidInput, appErr.Type())
	assert.Contains(t, appErr.Error(), "task queue <worker's task queue>@"+cluster)

	st := deployIn(t, env, tq, cluster, m)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	require.Len(t, st.History, 1)
	assert.Equal(t, []string{host}, st.Hostnames)

	list, err := eu.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: manifest.ServiceLabel + "=web"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1, "cluster it-eu runs the lease's web ReplicaSet")
	assert.Equal(t, int32(2), list.Items[0].Status.AvailableReplicas)
	_, err = env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the worker's own cluster has no namespace of the lease: %v", err)
	_, err = env.Temporal.DescribeWorkflowExecution(ctx, api.ClusterRolloutWorkflowID(cluster, ns, "web"), "")
	assert.NoError(t, err, "the rollout is cluster it-eu's own workflow")
	_, err = env.Temporal.DescribeWorkflowExecution(ctx, api.RolloutWorkflowID(ns, "web"), "")
	assert.Error(t, err, "no rollout of the worker's own cluster")
}

// Issue 38.3 on another cluster: a worker started with --clusters and
// --routing gateway routes the leases it deploys there through that
// cluster's Gateway of the same name (the local stack's Traefik, started
// in the extra cluster): the lease's hostname is an HTTPRoute in that
// cluster, accepted by its Gateway for its generation before the deploy
// ends, and it has no Ingress there (before, it did, and no route).
func TestALeaseOnAnotherClusterRoutesThroughThatClustersGateway(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	eu := env.Cluster(t, "it-gw")
	env.ClusterGateway(t, eu.Name)
	tq := testenv.Name(t, "tq")
	gw := manifest.GatewayRef{Namespace: devstack.GatewayNamespace, Name: devstack.GatewayName, Section: devstack.GatewayListener}
	startWorker(t, env, tq, freeAddr(t), "--clusters", eu.Name,
		"--routing", "gateway", "--gateway", gw.Namespace+"/"+gw.Name, "--gateway-listener", gw.Section)

	id := testenv.ShortName("lease")
	createLease(t, env, id)
	ns := manifest.Namespace(id)
	t.Cleanup(func() {
		_ = env.Temporal.TerminateWorkflow(context.Background(), api.DeployWorkflowIDIn(id, eu.Name), "", "test over")
		_ = eu.Activities.Hostnames.ReleaseAll(context.Background(), id)
		_ = eu.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	host := id + ".apps.example.com"
	m := manifest.Manifest{Lease: id, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27",
		Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{host}}}}}}}}
	st := deployIn(t, env, tq, eu.Name, m)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)

	route, err := eu.Dynamic.Resource(activities.HTTPRouteResource).Namespace(ns).Get(ctx, manifest.RouteName("web", 80), metav1.GetOptions{})
	require.NoError(t, err, "the lease's hostname is an HTTPRoute in cluster %s", eu.Name)
	ok, why := activities.RouteAccepted(route, gw)
	assert.True(t, ok, "the deploy ended with its route accepted by %s's Gateway: %s", eu.Name, why)
	hosts, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
	assert.Equal(t, []string{host}, hosts)
	_, err = eu.Kube.NetworkingV1().Ingresses(ns).Get(ctx, manifest.IngressName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no Ingress with gateway routing: %v", err)
	_, err = env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing of the lease in the worker's own cluster: %v", err)
}

// Issue 23 "Done when": a worker SIGKILLed in the middle of a placement's
// wave, and started again, finishes the placement without writing
// anything twice: each cluster's lease deployed once (one deploy in its
// workflow, one ReplicaSet created, by the API server's audit log), the
// cluster deploying at the kill included.
func TestAPlacementSurvivesWorkerSIGKILLMidWave(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	eu := env.Cluster(t, "it-eu")
	cluster := eu.Name
	tq := testenv.Name(t, "tq")
	first := startWorker(t, env, tq, freeAddr(t), "--clusters", cluster)

	id := testenv.ShortName("lease")
	createLease(t, env, id)
	ns := manifest.Namespace(id)
	t.Cleanup(func() {
		_ = env.Temporal.TerminateWorkflow(context.Background(), api.DeployWorkflowIDIn(id, cluster), "", "test over")
		_ = eu.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	four := int32(4)
	m := manifest.Manifest{Lease: id,
		Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &four,
			PodAnnotations: map[string]string{"deployflow.dev/ready-after": "3s"}}},
		Placement: &manifest.Placement{Waves: []manifest.Wave{{Clusters: []string{"local"}}, {Clusters: []string{cluster}}}},
	}
	run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: api.PlacementWorkflowID(id), TaskQueue: tq},
		api.PlacementWorkflow, api.PlacementInput{Manifest: m, Trigger: "test"})
	require.NoError(t, err)

	// Mid-wave 2: cluster it-eu's rollout under way.
	testenv.Eventually(t, 2*time.Minute, 20*time.Millisecond, "wave 2's rollout never got under way", func() (bool, string) {
		list, err := eu.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 1 && list.Items[0].Status.AvailableReplicas < 4, fmt.Sprint(err)
	})
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	<-first.exited
	startWorker(t, env, tq, freeAddr(t), "--clusters", cluster)

	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var st api.PlacementStatus
	require.NoError(t, run.Get(wctx, &st))
	assert.Equal(t, api.PlacementSucceeded, st.Phase)

	for c, audit := range map[string]string{"": env.Stack.AuditLog(), cluster: filepath.Join(filepath.Dir(env.Stack.AuditLog()), "audit-"+cluster+".log")} {
		v, err := env.Patient().QueryWorkflow(ctx, api.DeployWorkflowIDIn(id, c), "", api.QueryStatus)
		require.NoError(t, err)
		var ds api.DeployStatus
		require.NoError(t, v.Get(&ds))
		assert.Len(t, ds.History, 1, "cluster %q: deployed once", c)
		assert.Equal(t, 1, replicaSetCreates(t, audit, ns), "cluster %q: its ReplicaSet created once", c)
	}
}

// replicaSetCreates counts the successful ReplicaSet creations in namespace
// ns in an API server's audit log, and in the backup it rotated to: the
// stack's API server rotates its log at 100 MB (--audit-log-maxsize,
// keeping one backup named <log>-<time>.log). Found by CI run 36: under
// the whole suite the local cluster's log rotated between this test's
// create and its read, and the create was counted 0 times.
func replicaSetCreates(t *testing.T, auditLog, ns string) int {
	backups, err := filepath.Glob(strings.TrimSuffix(auditLog, ".log") + "-20*.log")
	require.NoError(t, err)
	var data []byte
	for _, f := range append(backups, auditLog) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		data = append(data, b...)
		data = append(data, '\n')
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"verb":"create"`) && strings.Contains(line, `"resource":"replicasets","namespace":"`+ns+`"`) &&
			strings.Contains(line, `"stage":"ResponseComplete"`) && strings.Contains(line, `"code":201`) {
			n++
		}
	}
	return n
}

// Issue 23.3, "global where the operator says so": with --global-hostnames
// a hostname is one lease's in every cluster. Lease A holds it in the
// worker's own cluster; lease B, another owner's, is refused it in cluster
// it-eu, though nothing holds it there (its deploy fails naming A, and
// writes nothing there); A's own deploy to it-eu shares it, the
// reservation recording both clusters.
func TestGlobalHostnamesBelongToOneLeaseInEveryCluster(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	eu, tq, a, b := twoOwnersInTwoClusters(t, env, "--global-hostnames")
	cluster := eu.Name
	host := a + ".global.example.com"
	web := func(lease string) manifest.Manifest {
		one := int32(1)
		return manifest.Manifest{Lease: lease, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &one,
			Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{host}}}}}}}}
	}

	st := deployIn(t, env, tq, "", web(a))
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)

	st = deployIn(t, env, tq, cluster, web(b))
	assert.Equal(t, api.PhaseFailed, st.Phase)
	assert.Contains(t, st.LastError, "hostname "+host+" is held by lease "+a+" of owner acme")
	_, err := eu.Kube.CoreV1().Namespaces().Get(ctx, manifest.Namespace(b), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing of lease %s written in %s: %v", b, cluster, err)

	st = deployIn(t, env, tq, cluster, web(a))
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, []string{host}, st.Hostnames, "the lease's deploy to it-eu shares its hostname")
	res, err := env.Dynamic.Resource(crds.HostnameReservations).Get(ctx, host, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", res.GetLabels()[reserve.UsedByLabel("local")])
	assert.Equal(t, "true", res.GetLabels()[reserve.UsedByLabel(cluster)])
	_, err = eu.Dynamic.Resource(crds.HostnameReservations).Get(ctx, host, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "reserved in the worker's own cluster only: %v", err)
}

// Issue 23.3, "global where the operator says so", for IPs: with
// --global-ips a lease's IP endpoint has the same address in every
// cluster (one pool, the worker's own cluster's store), and another
// lease's deploy to cluster it-eu never gets that address there, though
// nothing holds it in it-eu's own store.
func TestGlobalIPsGiveAnEndpointOneAddressInEveryCluster(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	pool := "10.241.7.0/29" // this test's own: its leases are the only ones in it
	eu, tq, a, b := twoOwnersInTwoClusters(t, env, "--global-ips", "--ip-pool", pool)
	cluster := eu.Name
	edge := func(lease string) manifest.Manifest {
		one := int32(1)
		return manifest.Manifest{Lease: lease, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &one,
			Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{IP: "edge"}}}}}}
	}
	lbIP := func(kc kubernetes.Interface, lease string) string {
		svc, err := kc.CoreV1().Services(manifest.Namespace(lease)).Get(ctx, "web-ip-edge", metav1.GetOptions{})
		require.NoError(t, err)
		return svc.Spec.LoadBalancerIP
	}

	st := deployIn(t, env, tq, "", edge(a))
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	home := st.IPs["edge"]
	require.True(t, netip.MustParsePrefix(pool).Contains(netip.MustParseAddr(home)), home)

	// b first: from it-eu's own store it would get the lowest address, a's.
	st = deployIn(t, env, tq, cluster, edge(b))
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.NotEqual(t, home, st.IPs["edge"], "another lease never gets it, in any cluster")
	assert.Equal(t, st.IPs["edge"], lbIP(eu.Kube, b))

	st = deployIn(t, env, tq, cluster, edge(a))
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, home, st.IPs["edge"], "the lease's endpoint has one address in every cluster")
	assert.Equal(t, home, lbIP(eu.Kube, a))
	assert.Equal(t, home, lbIP(env.Kube, a))
	res, err := env.Dynamic.Resource(crds.IPReservations).Get(ctx, home, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", res.GetLabels()[reserve.UsedByLabel("local")])
	assert.Equal(t, "true", res.GetLabels()[reserve.UsedByLabel(cluster)])
	list, err := eu.Dynamic.Resource(crds.IPReservations).List(ctx, metav1.ListOptions{LabelSelector: crds.LabelLease + " in (" + a + "," + b + ")"})
	require.NoError(t, err)
	assert.Empty(t, list.Items, "reserved in the worker's own cluster only")
}

// twoOwnersInTwoClusters starts extra cluster it-eu and a worker for it
// and its own cluster with flags added, and creates two leases: a (owner
// acme) and b (owner globex). At the end their workflows in it-eu, their
// reservations in both clusters' stores and their namespaces in it-eu go.
func twoOwnersInTwoClusters(t *testing.T, env *testenv.Env, flags ...string) (eu *app.Cluster, tq, a, b string) {
	t.Helper()
	eu = env.Cluster(t, "it-eu")
	tq = testenv.Name(t, "tq")
	startWorker(t, env, tq, freeAddr(t), append([]string{"--clusters", eu.Name}, flags...)...)
	a, b = testenv.ShortName("lease"), testenv.ShortName("lease")
	createLease(t, env, a)
	_, err := env.Activities().Leases.Create(context.Background(), b, "globex")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		for _, id := range []string{a, b} {
			_ = env.Temporal.TerminateWorkflow(ctx, api.DeployWorkflowIDIn(id, eu.Name), "", "test over")
			for _, acts := range []*activities.Activities{env.Activities(), eu.Activities} {
				_ = acts.Hostnames.ReleaseAll(ctx, id)
				_ = acts.IPs.ReleaseAll(ctx, id)
			}
			_ = eu.Kube.CoreV1().Namespaces().Delete(ctx, manifest.Namespace(id), metav1.DeleteOptions{})
		}
		_ = env.Dynamic.Resource(crds.Leases).Delete(ctx, b, metav1.DeleteOptions{})
	})
	return eu, tq, a, b
}

// deployIn deploys m to a cluster ("" the worker's own) through the
// lease's workflow there, and waits for the deploy's end.
func deployIn(t *testing.T, env *testenv.Env, tq, cluster string, m manifest.Manifest) api.DeployStatus {
	t.Helper()
	ctx := context.Background()
	id := api.DeployWorkflowIDIn(m.Lease, cluster)
	before := 0
	if v, err := env.Patient().QueryWorkflow(ctx, id, "", api.QueryStatus); err == nil {
		var st api.DeployStatus
		if v.Get(&st) == nil {
			before = len(st.History)
		}
	}
	// A workflow task timed out on a loaded machine (CI run 42, on
	// PostgreSQL with three clusters starting beside it) leaves the run
	// refusing updates until its next task: Temporal's WorkflowNotReady,
	// which the CLI retries (transient); so does this, with a new start
	// operation each time (one is used once).
	testenv.Eventually(t, 2*time.Minute, 500*time.Millisecond, "the deploy update to "+id+" was never taken", func() (bool, string) {
		start := env.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: id, TaskQueue: config.ClusterTaskQueue(tq, cluster),
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, api.DeployWorkflow, api.DeployInput{Manifest: m, Trigger: "test", Cluster: cluster})
		h, err := env.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: api.UpdateDeploy,
				Args: []any{api.DeployRequest{Manifest: m, Trigger: "test"}}, WaitForStage: client.WorkflowUpdateStageCompleted},
		})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		var notReady *serviceerror.WorkflowNotReady
		if err != nil && !errors.As(err, &notReady) && !strings.Contains(err.Error(), "Workflow Task in failed state") {
			require.NoError(t, err) // not transient: fail now
		}
		return err == nil, fmt.Sprint(err)
	})
	var st api.DeployStatus
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the deploy of "+id+" never ended", func() (bool, string) {
		v, err := env.Patient().QueryWorkflow(ctx, id, "", api.QueryStatus)
		if err != nil {
			return false, err.Error()
		}
		if err := v.Get(&st); err != nil {
			return false, err.Error()
		}
		return len(st.History) > before && st.Phase != api.PhaseDeploying, fmt.Sprintf("phase %s, %d deploys", st.Phase, len(st.History))
	})
	return st
}
