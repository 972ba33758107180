package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 10.2, least privilege proven on the real apiserver: the chart's
// ServiceAccount, ClusterRole, binding and admission policy are applied; the
// worker binary runs with a kubeconfig holding only a token minted for that
// ServiceAccount; a lease is deployed, updated, fails an update (and keeps
// its last good version) and is torn down, with no request refused. The
// same identity cannot read Secrets, create pods, touch RBAC or CRDs, or
// write outside deployflow's namespaces.
func TestWorkerRunsWithOnlyTheChartsRBAC(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	release := testenv.ShortName("lp")
	ns := release + "-system"
	sa := release + "-deployflow"
	user := "system:serviceaccount:" + ns + ":" + sa
	admin := func(args ...string) (string, error) {
		return run(env.Stack.Bin("kubectl"), append([]string{"--kubeconfig", env.Stack.Kubeconfig()}, args...), "")
	}

	// Install as "Install in a cluster" in docs/install.md does: a Secret
	// for mutual TLS to Temporal, then helm install. The worker
	// Deployment's pods cannot run here (no image registry, no Deployment
	// controller): the worker runs as a process below, with the identity
	// its pods get.
	pki := testenv.NewPKI(t)
	_, err := admin("create", "namespace", ns)
	require.NoError(t, err)
	_, err = admin("-n", ns, "create", "secret", "generic", "temporal-mtls",
		"--from-file=ca.crt="+pki.CA, "--from-file=tls.crt="+pki.ClientCert, "--from-file=tls.key="+pki.ClientKey)
	require.NoError(t, err)
	listed := release + "-listed" // a rollout namespace (standalone rollouts of Deployments)
	helm(t, "install", release, chart, "--namespace", ns, "--kubeconfig", env.Stack.Kubeconfig(), "--wait=false",
		"--set", "temporal.address=temporal-frontend.temporal.svc:7233,temporal.tls.enabled=true,temporal.tls.secretName=temporal-mtls",
		"--set", "rolloutNamespaces={"+listed+"}")
	t.Cleanup(func() {
		_, _ = run(testenv.Tool(t, devstack.Helm), []string{"uninstall", release, "--namespace", ns, "--kubeconfig", env.Stack.Kubeconfig()}, "")
		_, _ = admin("delete", "namespace", ns, "--wait=false")
	})
	d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, release+"-deployflow-worker", metav1.GetOptions{})
	require.NoError(t, err, "helm installed the worker Deployment")
	assert.Equal(t, sa, d.Spec.Template.Spec.ServiceAccountName)
	for _, crd := range []string{"leases.deployflow.dev", "hostnamereservations.deployflow.dev", "ipreservations.deployflow.dev"} {
		_, err := admin("get", "crd", crd)
		assert.NoError(t, err, "CRD %s installed", crd)
	}
	// CRDs as docs/install.md says to update them after a chart upgrade.
	_, err = admin("apply", "--server-side", "-f", filepath.Join(chart, "crds"))
	require.NoError(t, err)

	token, err := admin("create", "token", sa, "-n", ns, "--duration", "2h")
	require.NoError(t, err)
	kubeconfig := tokenKubeconfig(t, env.Stack.Kubeconfig(), strings.TrimSpace(token))
	asWorker := func(args ...string) (string, error) {
		return run(env.Stack.Bin("kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...), "")
	}
	whoami, err := asWorker("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	require.NoError(t, err)
	require.Equal(t, user, whoami, "the kubeconfig holds only the ServiceAccount's token")

	// What the worker can NOT do (RBAC).
	for _, denied := range [][]string{
		{"get", "secrets", "-A"}, {"list", "secrets", "-n", ns}, {"watch", "secrets", "-A"}, {"delete", "secrets", "-A"},
		{"update", "secrets", "-A"}, {"create", "pods", "-n", "default"},
		{"update", "pods", "-A"}, {"create", "rolebindings", "-A"}, {"update", "clusterroles"},
		{"escalate", "clusterroles"}, {"delete", "customresourcedefinitions"}, {"create", "customresourcedefinitions"},
		{"delete", "leases.deployflow.dev"}, {"create", "configmaps", "-A"}, {"impersonate", "serviceaccounts"},
		{"create", "pods/exec", "-A"}, {"update", "nodes"},
	} {
		out, _ := admin(append([]string{"auth", "can-i", "--as", user}, denied...)...)
		words := strings.Fields(out) // after kubectl's warnings, if any
		require.NotEmpty(t, words)
		assert.Equal(t, "no", words[len(words)-1], "the worker must not: %s", strings.Join(denied, " "))
	}
	// What its observer needs (issue 11.1): one cluster-wide watch of the
	// lease records and one of deployflow's ReplicaSets.
	for _, allowed := range [][]string{
		{"list", "leases.deployflow.dev"}, {"watch", "leases.deployflow.dev"},
		{"list", "replicasets.apps", "-A"}, {"watch", "replicasets.apps", "-A"},
		{"list", "statefulsets.apps", "-A"}, {"watch", "statefulsets.apps", "-A"},
	} {
		out, _ := admin(append([]string{"auth", "can-i", "--as", user}, allowed...)...)
		words := strings.Fields(out)
		require.NotEmpty(t, words)
		assert.Equal(t, "yes", words[len(words)-1], "the worker's observer needs: %s", strings.Join(allowed, " "))
	}
	// ...and where RBAC alone would allow a write, outside deployflow's
	// namespaces the admission policy refuses it. (It can take a moment
	// for the API server to load a new policy.)
	rsOutside := `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"intruder","namespace":"default"},
	  "spec":{"replicas":0,"selector":{"matchLabels":{"x":"y"}},"template":{"metadata":{"labels":{"x":"y"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`
	require.Eventually(t, func() bool {
		out, err := run(env.Stack.Bin("kubectl"), []string{"--kubeconfig", kubeconfig, "create", "-f", "-"}, rsOutside)
		return err != nil && strings.Contains(out, "deployflow acts only in namespaces labelled app.kubernetes.io/managed-by=deployflow")
	}, 2*time.Minute, 250*time.Millisecond, "a ReplicaSet in default must be refused by the admission policy")
	out, err := run(env.Stack.Bin("kubectl"), []string{"--kubeconfig", kubeconfig, "apply", "--server-side", "-f", "-"},
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"intruder","namespace":"kube-system"},"spec":{"ports":[{"port":80}]}}`)
	require.Error(t, err)
	assert.Contains(t, out, "not in kube-system", "the policy, not RBAC, refuses it")
	// A pod deleted (a stateful rollout's forced rollback, issue 39) only
	// in deployflow's namespaces: never another namespace's pod.
	_, err = admin("run", "bystander", "-n", "default", "--image", "nginx:1.27", "--restart", "Never")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin("delete", "pod", "bystander", "-n", "default", "--wait=false") })
	out, err = asWorker("delete", "pod", "bystander", "-n", "default", "--dry-run=server")
	require.Error(t, err, "%s", out)
	assert.Contains(t, out, "not in default", "the policy refuses a pod's delete outside deployflow's namespaces")
	// Nor in a listed rollout namespace, whose pods are not a lease's
	// (guards the review's finding that the policy let a pod be deleted, or
	// a StatefulSet written, wherever rollouts may write).
	_, err = admin("create", "namespace", listed)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin("delete", "namespace", listed, "--wait=false") })
	_, err = admin("run", "bystander", "-n", listed, "--image", "nginx:1.27", "--restart", "Never")
	require.NoError(t, err)
	out, err = asWorker("delete", "pod", "bystander", "-n", listed, "--dry-run=server")
	require.Error(t, err, "%s", out)
	assert.Contains(t, out, "deletes pods and writes StatefulSets only in lease namespaces", "a pod's delete in a rollout namespace")
	out, err = asWorker("create", "service", "clusterip", "allowed", "--tcp=80", "-n", listed, "--dry-run=server")
	assert.NoError(t, err, "a rollout namespace is still deployflow's for its Services: %s", out)
	// An analysis Job (batch/jobs create, for smoke tests) only in
	// deployflow's namespaces too.
	out, err = run(env.Stack.Bin("kubectl"), []string{"--kubeconfig", kubeconfig, "create", "-f", "-"},
		`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"intruder","namespace":"default"},
		  "spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}`)
	require.Error(t, err)
	assert.Contains(t, out, "not in default", "the policy refuses a Job outside deployflow's namespaces")
	// A Secret (a lease's registry login, issue 37.3) only in deployflow's
	// namespaces too: the worker may create one, never in kube-system.
	out, err = asWorker("create", "secret", "generic", "intruder", "-n", "kube-system", "--from-literal=k=v", "--dry-run=server")
	require.Error(t, err)
	assert.Contains(t, out, "not in kube-system", "the policy refuses a Secret outside deployflow's namespaces")
	_, err = asWorker("delete", "namespace", "kube-public", "--dry-run=server")
	require.Error(t, err, "no namespace of others may be deleted")

	// The worker, with that kubeconfig only, runs a lease's whole life.
	tq := testenv.Name(t, "tq")
	bins := buildBinaries(t)
	// As the chart's pods do (DEPLOYFLOW_OBSERVER_NAMESPACE from the
	// downward API): its observer's membership record in the release
	// namespace, the only namespace where its Role lets it write Leases.
	for _, c := range []struct {
		verb, ns, want string
	}{{"create", ns, "yes"}, {"update", ns, "yes"}, {"watch", ns, "yes"}, {"create", "default", "no"}, {"create", "kube-system", "no"}} {
		out, _ := admin("auth", "can-i", "--as", user, c.verb, "leases.coordination.k8s.io", "-n", c.ns)
		words := strings.Fields(out)
		require.NotEmpty(t, words)
		assert.Equal(t, c.want, words[len(words)-1], "can the worker %s coordination Leases in %s", c.verb, c.ns)
	}
	startWorker(t, bins.worker, "--kubeconfig", kubeconfig, "--task-queue", tq, "--allow-pod-keys", strings.Join(devstack.KwokKnobs, ","),
		"--temporal-address", devstack.TemporalAddress, "--metrics-address", freeAddr(t),
		"--observer-namespace", ns, "--observer-identity", release+"-worker-0")
	require.Eventually(t, func() bool {
		out, err := admin("-n", ns, "get", "leases.coordination.k8s.io", "-o", "jsonpath={.items[*].spec.holderIdentity}")
		return err == nil && strings.Contains(out, release+"-worker-0")
	}, 2*time.Minute, 250*time.Millisecond, "the worker renews its observer membership in the release namespace")
	lease := testenv.ShortName("lp")
	acts := env.Activities()
	_, err = acts.Leases.Create(ctx, lease, "acme")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Temporal.TerminateWorkflow(context.Background(), api.DeployWorkflowID(lease), "", "test over")
		_ = acts.Hostnames.ReleaseAll(context.Background(), lease)
		_ = acts.IPs.ReleaseAll(context.Background(), lease)
		_ = env.Dynamic.Resource(crds.Leases).Delete(context.Background(), lease, metav1.DeleteOptions{})
	})
	cli := func(args ...string) (string, error) {
		return run(bins.cli, append(args, "--temporal-address", devstack.TemporalAddress, "--task-queue", tq,
			"--kubeconfig", env.Stack.Kubeconfig()), "")
	}
	deploy := func(webImage string, broken bool) (string, error) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "m.yaml")
		require.NoError(t, os.WriteFile(file, []byte(shop(lease, webImage, broken)), 0o600))
		return cli("deploy", "-f", file, "--wait")
	}
	out, err = deploy("nginx:1.26", false)
	require.NoError(t, err, "first deploy:\n%s", out)
	out, err = deploy("nginx:1.27", false)
	require.NoError(t, err, "update:\n%s", out)
	out, err = deploy("nginx:1.28-broken", true)
	require.Error(t, err, "a failing update ends the deploy in failure:\n%s", out)
	leaseNS := manifest.Namespace(lease)
	require.Eventually(t, func() bool {
		rss, err := env.Kube.AppsV1().ReplicaSets(leaseNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		byImage := map[string]int32{}
		for _, rs := range rss.Items {
			if rs.Labels["deployflow.dev/service"] == "web" {
				byImage[rs.Spec.Template.Spec.Containers[0].Image] += rs.Status.AvailableReplicas
			}
		}
		return byImage["nginx:1.27"] == 2 && byImage["nginx:1.28-broken"] == 0
	}, 90*time.Second, 250*time.Millisecond, "the last good version (nginx:1.27) must be what runs after the failed update")
	out, err = cli("status", lease, "-o", "json")
	require.NoError(t, err, out)
	var st api.DeployStatus
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, api.PhaseFailed, st.Phase)

	out, err = cli("teardown", lease)
	require.NoError(t, err, "teardown:\n%s", out)
	require.Eventually(t, func() bool {
		_, err := env.Kube.CoreV1().Namespaces().Get(ctx, leaseNS, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute, 250*time.Millisecond, "teardown deletes the lease namespace")
	require.Eventually(t, func() bool {
		held, err := acts.Hostnames.Held(ctx, lease)
		return err == nil && len(held) == 0
	}, 2*time.Minute, 250*time.Millisecond, "teardown releases the hostname")

	// Namespaces the worker creates carry deployflow's label; in one, a
	// Deployment may only be dry-run (server-side defaulting), never stored.
	out, err = asWorker("create", "namespace", release+"-x", "--dry-run=server")
	require.Error(t, err, "a namespace without deployflow's label is refused")
	assert.Contains(t, out, "deployflow acts only in namespaces labelled")
	managed := release + "-managed"
	_, err = run(env.Stack.Bin("kubectl"), []string{"--kubeconfig", env.Stack.Kubeconfig(), "apply", "-f", "-"},
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+managed+`","labels":{"app.kubernetes.io/managed-by":"deployflow"}}}`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin("delete", "namespace", managed, "--wait=false") })
	_, err = asWorker("create", "deployment", "d", "--image", "nginx", "-n", managed, "--dry-run=server")
	require.NoError(t, err, "a dry-run Deployment is allowed (pod template defaulting)")
	out, err = asWorker("create", "deployment", "d", "--image", "nginx", "-n", managed)
	require.Error(t, err)
	assert.Contains(t, out, "deployflow only dry-runs Deployments")
}

type binaries struct{ worker, cli string }

var (
	buildOnce sync.Once
	built     binaries
	buildErr  error
)

func buildBinaries(t *testing.T) binaries {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "deployflow-chart-test")
		if err != nil {
			buildErr = err
			return
		}
		built = binaries{worker: filepath.Join(dir, "deployflow-worker"), cli: filepath.Join(dir, "deployflow")}
		for pkg, out := range map[string]string{"../worker": built.worker, "../starter": built.cli} {
			if o, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
				buildErr = err
				t.Logf("go build %s: %s", pkg, o)
				return
			}
		}
	})
	require.NoError(t, buildErr)
	return built
}

// startWorker runs the worker binary until the test ends; its output is
// checked for refused requests and shown if the test fails.
func startWorker(t *testing.T, bin string, args ...string) {
	t.Helper()
	var logs testenv.SyncBuffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone with the test, even on a timeout
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		assert.NotContains(t, logs.String(), "forbidden", "the chart's RBAC must cover every request the worker makes")
		if t.Failed() {
			t.Logf("worker output:\n%s", logs.String())
		}
	})
}

// tokenKubeconfig writes a kubeconfig for the admin kubeconfig's cluster
// whose only credential is token.
func tokenKubeconfig(t *testing.T, adminKubeconfig, token string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(adminKubeconfig)
	require.NoError(t, err)
	cluster := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
	out := clientcmdapi.NewConfig()
	out.Clusters["local"] = cluster
	out.AuthInfos["deployflow-worker"] = &clientcmdapi.AuthInfo{Token: token}
	out.Contexts["deployflow-worker"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "deployflow-worker"}
	out.CurrentContext = "deployflow-worker"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*out, path))
	return path
}

// shop is the test's manifest. web's progress deadline is 5s when its
// pods never turn Ready (the deploy fails, soon), and two minutes
// otherwise: with the rest of the suite beside it, pods may take longer
// than 5s to turn Ready.
func shop(lease, webImage string, broken bool) string {
	never, deadline := "", "120"
	if broken {
		never, deadline = "\n    podLabels: {deployflow.dev/never-ready: \"true\"}", "5"
	}
	return `lease: ` + lease + `
services:
  - name: web
    image: ` + webImage + `
    replicas: 2` + never + `
    ports:
      - port: 80
        expose:
          http:
            hostnames: [` + lease + `.apps.example.com]
    rollout:
      progressDeadlineSeconds: ` + deadline + `
  - name: api
    image: ghcr.io/acme/api:1.0
    replicas: 1
    ports:
      - port: 8080
        expose:
          ip: public
`
}

// run runs a command with stdin and returns its combined output; it is
// killed after 3 minutes.
func run(bin string, args []string, stdin string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return string(out), err
}

// freeAddr is a loopback address for a worker's --metrics-address
// (devstack.FreeAddr: below the ephemeral range, so no connection takes it
// before the worker binds it).
func freeAddr(t *testing.T) string {
	addr, err := devstack.FreeAddr()
	require.NoError(t, err)
	return addr
}
