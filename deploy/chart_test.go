// Package deploy holds the Helm chart (deploy/helm/deployflow) and its tests:
// it lints and renders with the pinned helm, and its RBAC is proven
// sufficient and least-privilege on the local kube-apiserver.
package deploy_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/worker/testenv"
)

const chart = "helm/deployflow"

// helm runs the pinned helm and returns its stdout.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(testenv.Tool(t, devstack.Helm), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "helm %s:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String()
}

// render is `helm template` parsed into objects by kind/name.
func render(t *testing.T, args ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := helm(t, append([]string{"template", "df", chart, "--namespace", "deployflow-system"}, args...)...)
	objs := map[string]*unstructured.Unstructured{}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			break
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		objs[u.GetKind()+"/"+u.GetName()] = u
	}
	return objs
}

func into(t *testing.T, u *unstructured.Unstructured, v any) {
	t.Helper()
	require.NotNil(t, u)
	b, err := yaml.Marshal(u.Object)
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(b, v))
}

func TestChartLints(t *testing.T) {
	helm(t, "lint", "--strict", chart)
	helm(t, "lint", "--strict", chart, "--set", "temporal.tls.enabled=true,temporal.tls.secretName=temporal-mtls,temporal.apiKey.secretName=temporal-cloud",
		"--set", "metrics.serviceMonitor.enabled=true,rolloutNamespaces={legacy,batch}",
		"--set", "clusters[0].name=eu-1,clusters[0].secretName=deployflow-eu-1")
}

// What a platform engineer relies on in the rendered chart: two non-root
// replicas with a read-only root filesystem, probes on /healthz and
// /readyz, a disruption budget, metrics, and the Temporal settings wired
// from values and Secrets.
func TestChartRendersTheWorkerAsDocumented(t *testing.T) {
	objs := render(t)
	var d appsv1.Deployment
	into(t, objs["Deployment/df-deployflow-worker"], &d)
	assert.Equal(t, int32(2), *d.Spec.Replicas)
	pod := d.Spec.Template.Spec
	assert.Equal(t, "df-deployflow", pod.ServiceAccountName)
	require.NotNil(t, pod.SecurityContext.RunAsNonRoot)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.NotEmpty(t, c.Resources.Requests)
	assert.Equal(t, "ghcr.io/deployflow/deployflow:0.1.0", c.Image)
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, "temporal-frontend.temporal.svc:7233", env["TEMPORAL_ADDRESS"])
	assert.Equal(t, "deployflow", env["DEPLOYFLOW_TASK_QUEUE"])
	// A lease's NetworkPolicy lets the worker's own namespace in (its HTTP
	// checks dial the lease's Services) and denies the private ranges.
	assert.Equal(t, "ingress-nginx,deployflow-system", env["DEPLOYFLOW_LEASE_INGRESS_FROM"])
	assert.Equal(t, config.DefaultEgressDeny, env["DEPLOYFLOW_LEASE_EGRESS_DENY"])
	assert.Equal(t, "kube-system/k8s-app=kube-dns", env["DEPLOYFLOW_LEASE_DNS"])
	assert.Equal(t, "100Gi", env["DEPLOYFLOW_LEASE_QUOTA_EPHEMERAL_STORAGE"])
	assert.Equal(t, "16", env["DEPLOYFLOW_LEASE_QUOTA_NODEPORTS"])
	assert.Equal(t, "NET_BIND_SERVICE,CHOWN,SETUID,SETGID", env["DEPLOYFLOW_ALLOW_CAPABILITIES"])
	assert.Equal(t, "false", env["DEPLOYFLOW_LEASE_LOADBALANCERS_WITHOUT_NODEPORTS"])
	assert.NotContains(t, env, "TEMPORAL_TLS", "no TLS unless asked")
	assert.NotContains(t, env, "DEPLOYFLOW_INSTALL_CRDS", "the chart installs the CRDs, not the worker")
	assert.Contains(t, objs, "PodDisruptionBudget/df-deployflow-worker")
	assert.Contains(t, objs, "Service/df-deployflow-metrics")
	assert.NotContains(t, objs, "ServiceMonitor/df-deployflow-worker", "optional, off by default")
	assert.Contains(t, objs, "ValidatingAdmissionPolicy/df-deployflow-worker-namespaces")
	// The observers' membership: each pod renews a record named after it
	// in the release namespace, which a Role (not the ClusterRole) allows.
	fields := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fields[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	assert.Equal(t, "metadata.namespace", fields["DEPLOYFLOW_OBSERVER_NAMESPACE"])
	assert.Equal(t, "metadata.name", fields["DEPLOYFLOW_OBSERVER_IDENTITY"])
	var members rbacv1.Role
	into(t, objs["Role/df-deployflow-worker-members"], &members)
	require.Len(t, members.Rules, 1)
	assert.Equal(t, []string{"coordination.k8s.io"}, members.Rules[0].APIGroups)
	assert.Equal(t, []string{"leases"}, members.Rules[0].Resources)
	assert.Contains(t, objs, "RoleBinding/df-deployflow-worker-members")

	objs = render(t, "--set", "temporal.tls.enabled=true,temporal.tls.secretName=temporal-mtls,temporal.tls.serverName=temporal.internal",
		"--set", "temporal.apiKey.secretName=temporal-cloud,metrics.serviceMonitor.enabled=true",
		"--set", "rolloutNamespaces={legacy,batch},blockedHostnames={.internal.example.com}",
		"--set", "prometheusURL=http://prometheus.monitoring:9090,notifyURL=https://hooks.example.com/deployflow",
		"--set", "leaseLimits.network.egressDeny=null,leaseLimits.network.ingressFrom={deployflow-system,envoy-gateway-system}",
		"--set", "leaseLimits.allowCapabilities=null")
	into(t, objs["Deployment/df-deployflow-worker"], &d)
	c = d.Spec.Template.Spec.Containers[0]
	env = map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.Name == "TEMPORAL_API_KEY" {
			require.NotNil(t, e.ValueFrom, "the API key comes from a Secret")
			assert.Equal(t, "temporal-cloud", e.ValueFrom.SecretKeyRef.Name)
		}
	}
	assert.Contains(t, env, "TEMPORAL_API_KEY")
	assert.Equal(t, "true", env["TEMPORAL_TLS"])
	assert.Equal(t, "temporal.internal", env["TEMPORAL_TLS_SERVER_NAME"])
	assert.Equal(t, "/etc/deployflow/temporal-tls/ca.crt", env["TEMPORAL_TLS_SERVER_CA_CERT_PATH"])
	assert.Equal(t, "/etc/deployflow/temporal-tls/tls.crt", env["TEMPORAL_TLS_CLIENT_CERT_PATH"])
	assert.Equal(t, "legacy,batch", env["DEPLOYFLOW_ROLLOUT_NAMESPACES"])
	assert.Equal(t, ".internal.example.com", env["DEPLOYFLOW_BLOCKED_HOSTNAMES"])
	assert.Equal(t, "http://prometheus.monitoring:9090", env["DEPLOYFLOW_PROMETHEUS_URL"])
	assert.Equal(t, "https://hooks.example.com/deployflow", env["DEPLOYFLOW_NOTIFY_URL"])
	assert.Equal(t, "deployflow-system,envoy-gateway-system", env["DEPLOYFLOW_LEASE_INGRESS_FROM"], "the release's namespace once")
	assert.Equal(t, "none", env["DEPLOYFLOW_LEASE_EGRESS_DENY"], "an empty list is none, not the default")
	assert.Equal(t, "none", env["DEPLOYFLOW_ALLOW_CAPABILITIES"], "no capability may be added back: none, not the default")
	require.Len(t, d.Spec.Template.Spec.Volumes, 1)
	assert.Equal(t, "temporal-mtls", d.Spec.Template.Spec.Volumes[0].Secret.SecretName)
	assert.Contains(t, objs, "ServiceMonitor/df-deployflow-worker")
}

// Issue 23.1: the chart's values list the other clusters, a Secret with a
// kubeconfig each. Each Secret is mounted read-only where the worker's
// --cluster-kubeconfigs says, and the worker's own flag parsing takes the
// rendered settings (the mounted files stand in a temporary directory).
// The worker reads no Secret through the API: its RBAC is unchanged.
func TestChartWiresTheClustersFromTheirSecrets(t *testing.T) {
	objs := render(t, "--set", "clusterName=home",
		"--set", "clusters[0].name=eu-1,clusters[0].secretName=deployflow-eu-1",
		"--set", "clusters[1].name=us-1,clusters[1].secretName=deployflow-us-1,clusters[1].key=config,clusters[1].context=prod-us,clusters[1].routing=ingress")
	var d appsv1.Deployment
	into(t, objs["Deployment/df-deployflow-worker"], &d)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, "home", env["DEPLOYFLOW_CLUSTER_NAME"])
	assert.Equal(t, "eu-1,us-1=prod-us", env["DEPLOYFLOW_CLUSTERS_CONFIG"])
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		assert.True(t, m.ReadOnly, m.Name)
		mounts[m.Name] = m.MountPath
	}
	secrets := map[string]string{}
	for _, v := range pod.Volumes {
		require.NotNil(t, v.Secret, v.Name)
		require.Len(t, v.Secret.Items, 1, v.Name)
		secrets[v.Secret.SecretName] = mounts[v.Name] + "/" + v.Secret.Items[0].Path + " from key " + v.Secret.Items[0].Key
	}
	assert.Equal(t, map[string]string{
		"deployflow-eu-1": "/etc/deployflow/clusters/eu-1/kubeconfig from key kubeconfig",
		"deployflow-us-1": "/etc/deployflow/clusters/us-1/kubeconfig from key config",
	}, secrets)

	// The worker's flags, as the pod would give them.
	dir := t.TempDir()
	kubeconfigs := strings.ReplaceAll(env["DEPLOYFLOW_CLUSTER_KUBECONFIGS"], "/etc/deployflow/clusters", dir)
	for _, name := range []string{"eu-1", "us-1"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "kubeconfig"), []byte("apiVersion: v1\nkind: Config\n"), 0o600))
	}
	refs, err := config.Clusters{ClusterName: env["DEPLOYFLOW_CLUSTER_NAME"], ClustersList: env["DEPLOYFLOW_CLUSTERS_CONFIG"], ClusterKubeconfigs: kubeconfigs,
		ClusterRouting: env["DEPLOYFLOW_CLUSTER_ROUTING"]}.Refs()
	require.NoError(t, err)
	assert.Equal(t, []config.ClusterRef{
		{Name: "eu-1", Kubeconfig: filepath.Join(dir, "eu-1", "kubeconfig")},
		{Name: "us-1", Context: "prod-us", Kubeconfig: filepath.Join(dir, "us-1", "kubeconfig"), Routing: config.RoutingIngress},
	}, refs)

	var rbac, none rbacv1.ClusterRole
	into(t, objs["ClusterRole/df-deployflow-worker"], &rbac)
	into(t, render(t)["ClusterRole/df-deployflow-worker"], &none)
	assert.Equal(t, none.Rules, rbac.Rules, "the clusters' Secrets are mounted, never read through the API")

	into(t, render(t)["Deployment/df-deployflow-worker"], &d)
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		assert.NotContains(t, []string{"DEPLOYFLOW_CLUSTERS_CONFIG", "DEPLOYFLOW_CLUSTER_KUBECONFIGS", "DEPLOYFLOW_GLOBAL_HOSTNAMES", "DEPLOYFLOW_GLOBAL_IPS"}, e.Name, "a single-cluster install sets no clusters")
	}

	// Global hostnames: the worker is told, and may write a reservation's
	// labels (which clusters use it), nothing more.
	global := render(t, "--set", "globalHostnames=true,clusters[0].name=eu-1,clusters[0].secretName=deployflow-eu-1")
	into(t, global["Deployment/df-deployflow-worker"], &d)
	env = map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, "true", env["DEPLOYFLOW_GLOBAL_HOSTNAMES"])
	into(t, global["ClusterRole/df-deployflow-worker"], &rbac)
	patch := rbacv1.PolicyRule{APIGroups: []string{"deployflow.dev"}, Resources: []string{"hostnamereservations"}, Verbs: []string{"patch"}}
	var others []rbacv1.PolicyRule
	for _, r := range rbac.Rules {
		if !assert.ObjectsAreEqual(patch, r) {
			others = append(others, r)
		}
	}
	assert.Len(t, others, len(rbac.Rules)-1, "one more rule: %v", patch)
	assert.Equal(t, none.Rules, others, "and nothing else")

	// Global IPs, with global hostnames or alone: likewise.
	for set, resources := range map[string][]string{
		"globalIPs=true":                      {"ipreservations"},
		"globalIPs=true,globalHostnames=true": {"hostnamereservations", "ipreservations"},
	} {
		objs := render(t, "--set", set+",clusters[0].name=eu-1,clusters[0].secretName=deployflow-eu-1")
		into(t, objs["Deployment/df-deployflow-worker"], &d)
		env = map[string]string{}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		assert.Equal(t, "true", env["DEPLOYFLOW_GLOBAL_IPS"], set)
		into(t, objs["ClusterRole/df-deployflow-worker"], &rbac)
		patch := rbacv1.PolicyRule{APIGroups: []string{"deployflow.dev"}, Resources: resources, Verbs: []string{"patch"}}
		others = nil
		for _, r := range rbac.Rules {
			if !assert.ObjectsAreEqual(patch, r) {
				others = append(others, r)
			}
		}
		assert.Len(t, others, len(rbac.Rules)-1, "%s: one more rule: %v", set, patch)
		assert.Equal(t, none.Rules, others, "%s: and nothing else", set)
	}
}

// The ClusterRole reads no Secret (it creates a lease's and deletes them by
// label), grants no Pod writes but the delete of a stateful rollout's
// forced rollback, no RBAC and no CRDs,
// and no wildcard anywhere.
func TestChartRBACHasNoDangerousGrants(t *testing.T) {
	var role rbacv1.ClusterRole
	into(t, render(t)["ClusterRole/df-deployflow-worker"], &role)
	require.NotEmpty(t, role.Rules)
	for _, r := range role.Rules {
		for _, s := range append(append(append([]string{}, r.APIGroups...), r.Resources...), r.Verbs...) {
			assert.NotEqual(t, "*", s, "no wildcard: %+v", r)
		}
		for _, res := range r.Resources {
			assert.NotContains(t, []string{"configmaps", "roles", "rolebindings", "clusterroles", "clusterrolebindings",
				"customresourcedefinitions", "pods/exec", "nodes"}, res, "rule %+v", r)
			if res == "secrets" {
				// a lease's secrets are written, never read (issue 37.3)
				assert.ElementsMatch(t, []string{"create", "deletecollection"}, r.Verbs, "secrets are only created and deleted by label")
			}
			if res == "pods" {
				// Read, and deleted only by a stateful rollout's return to
				// its previous revision (a pod of the failed one that never
				// turned Ready); the admission policy confines the delete to
				// deployflow's namespaces (TestWorkerRunsWithOnlyTheChartsRBAC).
				assert.ElementsMatch(t, []string{"get", "list", "watch", "delete"}, r.Verbs, "pods are read, and deleted by a stateful rollout's forced rollback only")
			}
		}
		assert.NotContains(t, r.Verbs, "escalate")
		assert.NotContains(t, r.Verbs, "bind")
		assert.NotContains(t, r.Verbs, "impersonate")
	}
}

// Issue 37.3: codec.keysSecretName mounts the payload codec's keys file
// read-only and points the worker at it; without it the worker gets no
// keys file (and refuses manifests with secrets).
func TestChartMountsTheCodecKeys(t *testing.T) {
	var d appsv1.Deployment
	into(t, render(t, "--set", "codec.keysSecretName=deployflow-codec")["Deployment/df-deployflow-worker"], &d)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, "/etc/deployflow/codec/keys.json", env["DEPLOYFLOW_CODEC_KEYS_FILE"])
	require.Len(t, c.VolumeMounts, 1)
	assert.Equal(t, "/etc/deployflow/codec", c.VolumeMounts[0].MountPath)
	assert.True(t, c.VolumeMounts[0].ReadOnly)
	require.Len(t, pod.Volumes, 1)
	assert.Equal(t, "deployflow-codec", pod.Volumes[0].Secret.SecretName)
	assert.Equal(t, "keys.json", pod.Volumes[0].Secret.Items[0].Path)

	into(t, render(t)["Deployment/df-deployflow-worker"], &d)
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		assert.NotEqual(t, "DEPLOYFLOW_CODEC_KEYS_FILE", e.Name)
	}
}

// Issue 38.3: routing.mode gateway points the worker at the Gateway (a
// missing routing.gateway fails the render, naming the value) and grants
// it HTTPRoutes; the default routes through the Ingress and grants none.
func TestChartRoutesThroughTheGatewayItNames(t *testing.T) {
	envOf := func(objs map[string]*unstructured.Unstructured) map[string]string {
		var d appsv1.Deployment
		into(t, objs["Deployment/df-deployflow-worker"], &d)
		env := map[string]string{}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		return env
	}
	grantsRoutes := func(objs map[string]*unstructured.Unstructured) bool {
		for name, o := range objs {
			if !strings.HasPrefix(name, "ClusterRole/") {
				continue
			}
			var role rbacv1.ClusterRole
			into(t, o, &role)
			for _, r := range role.Rules {
				if slices.Contains(r.Resources, "httproutes") {
					return true
				}
			}
		}
		return false
	}
	objs := render(t, "--set", "routing.mode=gateway", "--set", "routing.gateway=gateway-system/public", "--set", "routing.listener=http")
	env := envOf(objs)
	assert.Equal(t, "gateway", env["DEPLOYFLOW_ROUTING"])
	assert.Equal(t, "gateway-system/public", env["DEPLOYFLOW_GATEWAY"])
	assert.Equal(t, "http", env["DEPLOYFLOW_GATEWAY_LISTENER"])
	assert.True(t, grantsRoutes(objs), "the worker may write HTTPRoutes")
	var role rbacv1.ClusterRole
	into(t, objs["ClusterRole/df-deployflow-worker"], &role)
	assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"gateways"},
		Verbs: []string{"get"}, ResourceNames: []string{"public"}}, "the worker may read its Gateway, and no other, to check it at start")

	objs = render(t)
	assert.Equal(t, "ingress", envOf(objs)["DEPLOYFLOW_ROUTING"])
	assert.NotContains(t, envOf(objs), "DEPLOYFLOW_GATEWAY")
	assert.False(t, grantsRoutes(objs), "no HTTPRoutes without a Gateway")

	out, err := exec.Command(testenv.Tool(t, devstack.Helm), "template", "df", chart, "--set", "routing.mode=gateway").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "routing.gateway: give the Gateway as namespace/name")
}
