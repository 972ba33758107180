package workflows_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Guards issue 35.3: no NetworkPolicy existed anywhere, so a tenant's pod
// could reach other leases' pods, the Prometheus the analyses read, the
// worker, the Temporal frontend and the clouds' metadata endpoints. Now a
// lease namespace gets its NetworkPolicy with its quota, before its first
// pod. The local stack's pods carry no traffic, so the paths are judged by
// a NetworkPolicy evaluator (cyclonus's matcher, which computes whether
// the policies allow a connection) on what the deploys wrote: the
// policies, namespaces and pods read back from the API server. The
// operator's flags are set as an operator would: the gateway's namespace
// may reach leases, and a proxy's range is allowed inside the denied ones.
func TestALeasesPodsReachOnlyWhatItsNetworkPolicyAllows(t *testing.T) {
	const gateway, proxy = "envoy-gateway-system", "192.168.50.0/24"
	dt := newDeployTestWith(t, func(a *activities.Activities) {
		a.Namespace.IngressFrom = "ingress-nginx," + gateway
		a.Namespace.EgressAllow = proxy
	})
	other := dt.lease + "-n"
	dt.createLease(other, "globex")
	dt.deploy(web(dt.lease, "web", "nginx:1.27", 1))
	dt.deploy(web(other, "web", "nginx:1.27", 1))
	for _, lease := range []string{dt.lease, other} {
		st := dt.waitRevision(lease, 1)
		require.Equal(t, api.PhaseActive, st.Phase, "lease %s: %s", lease, st.LastError)
	}

	ctx := context.Background()
	var policies []*networkingv1.NetworkPolicy
	peers := map[string]*matcher.TrafficPeer{}
	for name, lease := range map[string]string{"tenant": dt.lease, "other lease": other} {
		ns, err := dt.env.Kube.CoreV1().Namespaces().Get(ctx, manifest.Namespace(lease), metav1.GetOptions{})
		require.NoError(t, err)
		nps, err := dt.env.Kube.NetworkingV1().NetworkPolicies(ns.Name).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, nps.Items, 1, "lease %s's namespace has its NetworkPolicy", lease)
		np := nps.Items[0]
		policies = append(policies, &np)
		pods, err := dt.env.Kube.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, pods.Items)
		for _, p := range pods.Items {
			assert.False(t, p.CreationTimestamp.Before(&np.CreationTimestamp), "pod %s/%s was created before its namespace's NetworkPolicy", ns.Name, p.Name)
		}
		pod := pods.Items[0]
		require.NotEmpty(t, pod.Status.PodIP, "pod %s/%s has an address", ns.Name, pod.Name)
		peers[name] = &matcher.TrafficPeer{IP: pod.Status.PodIP,
			Internal: &matcher.InternalPeer{Namespace: ns.Name, NamespaceLabels: ns.Labels, PodLabels: pod.Labels}}
	}
	// The cluster's other parties, as pods of their namespaces (addresses
	// in the pod range apart from the stack's pods; nothing of theirs is
	// written by the deploy), and addresses outside the cluster.
	pod := func(ns, ip string, labels map[string]string) *matcher.TrafficPeer {
		return &matcher.TrafficPeer{IP: ip, Internal: &matcher.InternalPeer{Namespace: ns,
			NamespaceLabels: map[string]string{activities.NamespaceNameLabel: ns}, PodLabels: labels}}
	}
	outside := func(ip string) *matcher.TrafficPeer { return &matcher.TrafficPeer{IP: ip} }
	peers["prometheus"] = pod("monitoring", "10.244.9.7", map[string]string{"app.kubernetes.io/name": "prometheus"})
	peers["temporal frontend"] = pod("temporal", "10.244.9.8", map[string]string{"app.kubernetes.io/component": "frontend"})
	peers["worker"] = pod("deployflow", "10.244.9.9", map[string]string{"app.kubernetes.io/name": "deployflow"})
	peers["cluster DNS"] = pod("kube-system", "10.244.9.2", map[string]string{"k8s-app": "kube-dns"})
	peers["ingress controller"] = pod("ingress-nginx", "10.244.9.4", map[string]string{"app.kubernetes.io/name": "ingress-nginx"})
	peers["gateway"] = pod(gateway, "10.244.9.5", map[string]string{"app.kubernetes.io/name": "envoy"})

	policy := matcher.BuildNetworkPolicies(false, policies)
	tenant := peers["tenant"]
	for _, c := range []struct {
		what     string
		from, to *matcher.TrafficPeer
		port     int
		protocol corev1.Protocol
		allowed  bool
	}{
		{"tenant to its own pods", tenant, tenant, 80, corev1.ProtocolTCP, true},
		{"tenant to the internet", tenant, outside("1.1.1.1"), 443, corev1.ProtocolTCP, true},
		{"tenant to the cluster DNS", tenant, peers["cluster DNS"], 53, corev1.ProtocolUDP, true},
		{"tenant to the cluster DNS over TCP", tenant, peers["cluster DNS"], 53, corev1.ProtocolTCP, true},
		{"tenant to the operator's proxy range", tenant, outside("192.168.50.10"), 3128, corev1.ProtocolTCP, true},
		{"the ingress controller to the tenant", peers["ingress controller"], tenant, 80, corev1.ProtocolTCP, true},
		{"the gateway to the tenant", peers["gateway"], tenant, 80, corev1.ProtocolTCP, true},

		{"tenant to another lease's pod", tenant, peers["other lease"], 80, corev1.ProtocolTCP, false},
		{"another lease's pod to the tenant", peers["other lease"], tenant, 80, corev1.ProtocolTCP, false},
		{"tenant to Prometheus", tenant, peers["prometheus"], 9090, corev1.ProtocolTCP, false},
		{"tenant to the Temporal frontend", tenant, peers["temporal frontend"], 7233, corev1.ProtocolTCP, false},
		{"tenant to the worker's metrics", tenant, peers["worker"], 9090, corev1.ProtocolTCP, false},
		{"tenant to the cluster DNS pods on another port", tenant, peers["cluster DNS"], 8080, corev1.ProtocolTCP, false},
		{"tenant to a Service address", tenant, outside("10.96.0.1"), 443, corev1.ProtocolTCP, false},
		{"tenant to a node", tenant, outside("172.18.0.2"), 10250, corev1.ProtocolTCP, false},
		{"tenant to the metadata endpoint", tenant, outside("169.254.169.254"), 80, corev1.ProtocolTCP, false},
		{"tenant to the IPv6 metadata endpoint", tenant, outside("fd00:ec2::254"), 80, corev1.ProtocolTCP, false},
		{"tenant to a private range beside the proxy's", tenant, outside("192.168.51.10"), 3128, corev1.ProtocolTCP, false},
		{"Prometheus to the tenant", peers["prometheus"], tenant, 8080, corev1.ProtocolTCP, false},
		{"the worker to the tenant (not listed in --lease-ingress-from)", peers["worker"], tenant, 80, corev1.ProtocolTCP, false},
	} {
		res := policy.IsTrafficAllowed(&matcher.Traffic{Source: c.from, Destination: c.to, ResolvedPort: c.port, Protocol: c.protocol})
		assert.Equal(t, c.allowed, res.IsAllowed(), "%s (%s:%d/%s): ingress allowed %t, egress allowed %t",
			c.what, c.to.IP, c.port, c.protocol, res.Ingress.IsAllowed(), res.Egress.IsAllowed())
	}
	if t.Failed() {
		for _, np := range policies {
			t.Logf("%s/%s: %s", np.Namespace, np.Name, fmt.Sprint(np.Spec))
		}
	}
}
