package activities

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An HTTP check's result is the status code, or a JSON field; what cannot
// be read has no value (inconclusive), an unreachable URL is an error.
func TestMeasureHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/json":
			_, _ = w.Write([]byte(`{"checks": {"errorRate": 0.02, "ok": true, "name": "web"}}`))
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	a := &Activities{HTTPCheckAllow: []string{"127.0.0.1/32"}}
	value := func(m *Measurement) any {
		if m.Value == nil {
			return nil
		}
		return *m.Value
	}
	for _, c := range []struct {
		path, field string
		want        any
		message     string
	}{
		{"/", "", 200.0, "status 200"},
		{"/down", "", 503.0, "status 503"},
		{"/json", "checks.errorRate", 0.02, "checks.errorRate = 0.02"},
		{"/json", "checks.ok", 1.0, "checks.ok = 1"},
		{"/json", "checks.name", nil, "status 200: checks.name is not a number or a boolean"},
		{"/json", "checks.missing", nil, "status 200: no field checks.missing in the answer"},
		{"/", "checks.ok", nil, "status 200, not JSON"},
	} {
		m, err := a.MeasureHTTP(context.Background(), HTTPCheckInput{URL: srv.URL + c.path, JSONField: c.field})
		require.NoError(t, err, c.path)
		assert.Equal(t, c.want, value(m), c.path+" "+c.field)
		assert.Contains(t, m.Message, c.message)
	}
	m, err := (&Activities{}).MeasureHTTP(context.Background(), HTTPCheckInput{Namespace: "lease-a", URL: srv.URL})
	require.NoError(t, err)
	assert.Nil(t, m.Value, "a host the worker does not allow is not checked")
	assert.Contains(t, m.Message, "not checked: 127.0.0.1 is not in the worker's --http-check-allow CIDRs")
	srv.Close()
	_, err = a.MeasureHTTP(context.Background(), HTTPCheckInput{URL: srv.URL})
	assert.Error(t, err, "an unreachable URL is retried")
}

// Issue 20.2: a lease's HTTP checks reach its own Services (by their
// ClusterIP, looked up in its namespace) and what the operator allows, by
// the address dialled. Before, any host shaped <x>.<lease ns>.svc.<anything>
// passed and DNS was never checked: web.lease-a.svc.evil.example resolved
// wherever its owner liked, and a name the operator allowed could resolve to
// the cloud's metadata address.
func TestHTTPCheckTargetsAreDecidedByAddress(t *testing.T) {
	svc := func(ns, name string, ips ...string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{ClusterIPs: ips}}
	}
	a := &Activities{
		Kube:           fake.NewClientset(svc("lease-a", "web-preview", "10.96.0.10"), svc("lease-b", "web", "10.96.0.20"), svc("lease-a", "headless")),
		HTTPCheckAllow: []string{"*.monitoring.svc.cluster.local", "10.1.0.0/16", "status.example.com", "localhost"},
	}
	p := a.httpCheckPolicy("lease-a")
	for _, c := range []struct {
		host string
		want string // the address dialled, or the refusal
	}{
		{"web-preview", "10.96.0.10"},
		{"web-preview.lease-a", "10.96.0.10"},
		{"web-preview.lease-a.svc", "10.96.0.10"},
		{"WEB-PREVIEW.lease-a.svc.cluster.local.", "10.96.0.10"},
		{"web-preview.lease-a.svc.evil.example", "not one of the lease's Services"},
		{"web.lease-a.svc.cluster.local.attacker.example", "not one of the lease's Services"},
		{"web.lease-b.svc.cluster.local", "not one of the lease's Services"},
		{"web.lease-b", "not one of the lease's Services"},
		{"web", "the lease has no Service web"},
		{"headless.lease-a", "no ClusterIP"},
		{"web.lease-a.example.com", "not one of the lease's Services"},
		{"10.1.2.3", "10.1.2.3"},
		{"10.2.0.1", "not in the worker's --http-check-allow CIDRs"},
		{"169.254.169.254", "not in the worker's --http-check-allow CIDRs"},
		{"127.0.0.1", "not in the worker's --http-check-allow CIDRs"},
		{"[::1]", "not in the worker's --http-check-allow CIDRs"},
		{"evil-status.example.com", "not one of the lease's Services"},
		// Allowed by name, but it resolves to loopback: refused by address.
		{"localhost", "resolves only to addresses no check may reach"},
	} {
		host := strings.Trim(c.host, "[]")
		tg, err := p.target(context.Background(), host)
		if err != nil {
			assert.Contains(t, err.Error(), c.want, c.host)
			continue
		}
		if assert.NotEmpty(t, tg.addrs, c.host) {
			assert.Equal(t, c.want, tg.addrs[0].String(), c.host)
		}
	}
}

// The operator can allow loopback by CIDR (the tests' own endpoints);
// redirects are checked as the first request is, by address, and a
// refused redirect is not followed.
func TestHTTPCheckRedirectsAreCheckedByAddress(t *testing.T) {
	var hit atomic.Int32
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hit.Add(1) }))
	defer forbidden.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(forbidden.URL, "http://"))
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-localhost":
			http.Redirect(w, r, "http://localhost:"+port+"/", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		}
	}))
	defer redirect.Close()
	// The redirector is allowed by its exact address; the forbidden server
	// shares 127.0.0.1 but only the redirector's port... so allow it by
	// name only: "localhost" resolves to loopback, which is refused.
	a := &Activities{HTTPCheckAllow: []string{"127.0.0.1/32", "localhost"}}
	for _, path := range []string{"/to-metadata", "/to-file"} {
		m, err := a.MeasureHTTP(context.Background(), HTTPCheckInput{Namespace: "lease-a", URL: redirect.URL + path})
		require.NoError(t, err, path)
		assert.Nil(t, m.Value, path)
		assert.Contains(t, m.Message, "not checked", path)
	}
	b := &Activities{HTTPCheckAllow: []string{"localhost"}}
	m, err := b.MeasureHTTP(context.Background(), HTTPCheckInput{Namespace: "lease-a", URL: "http://localhost:" + port + "/"})
	require.NoError(t, err)
	assert.Nil(t, m.Value)
	assert.Contains(t, m.Message, "not checked")
	assert.Zero(t, hit.Load(), "no request reached a loopback address the operator allowed only by name")
}

// A name the operator allows must resolve to a public address: every other
// class is refused unless an operator CIDR lists it (review of issue 20.2:
// private, CGNAT and IPv4-carrying IPv6 forms reached the cluster's own
// network). A listed ::ffff:a.b.c.d CIDR is a.b.c.d's.
func TestOnlyPublicAddressesAreDialledForAName(t *testing.T) {
	for ip, forbidden := range map[string]bool{
		"93.184.216.34": false, "2606:2800:220:1::1": false,
		"127.0.0.1": true, "::1": true, "169.254.169.254": true, "fe80::1": true, "10.96.0.1": true, "172.16.0.1": true,
		"192.168.1.1": true, "100.100.100.200": true, "fd12::1": true, "fd00:ec2::254": true, "64:ff9b::a00:1": true,
		"2002:a00:1::": true, "::a00:1": true, "::ffff:10.0.0.1": true, "0.0.0.0": true, "::": true, "224.0.0.1": true,
	} {
		assert.Equal(t, forbidden, forbiddenUnlessListed(netip.MustParseAddr(ip)), ip)
	}
	p := (&Activities{HTTPCheckAllow: []string{"::ffff:10.1.0.0/112"}}).httpCheckPolicy("lease-a")
	tg, err := p.target(context.Background(), "10.1.2.3")
	require.NoError(t, err)
	assert.Equal(t, "10.1.2.3", tg.addrs[0].String())
	tg, err = p.target(context.Background(), "::ffff:10.1.2.3")
	require.NoError(t, err)
	assert.Equal(t, "10.1.2.3", tg.addrs[0].String(), "dialled as the IPv4 address its check compares")
}

// The pod policy names every field that would give a pod the node's
// privileges, whoever typed the template (issue 20.5 and its review).
func TestPodPolicyNamesEachPrivilegedField(t *testing.T) {
	yes := true
	unconfined := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	spec := &corev1.PodSpec{
		HostNetwork: true, HostPID: true, HostIPC: true, ServiceAccountName: "cluster-admin", AutomountServiceAccountToken: &yes,
		SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}, SeccompProfile: unconfined},
		Volumes:         []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		Containers: []corev1.Container{{Name: "c", Image: "x", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}},
			SecurityContext: &corev1.SecurityContext{Privileged: &yes, Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}, SeccompProfile: unconfined}}},
	}
	got := strings.Join(podPolicyProblems("spec", spec, nil), "\n")
	for _, want := range []string{"spec.hostNetwork", "spec.hostPID", "spec.hostIPC", "spec.serviceAccountName", "spec.automountServiceAccountToken",
		"spec.securityContext.sysctls[0]: kernel.msgmax", "spec.securityContext.seccompProfile", "spec.volumes[0].hostPath",
		"spec.containers[0].ports[0].hostPort", "spec.containers[0].securityContext.privileged",
		"spec.containers[0].securityContext.capabilities.add: NET_ADMIN", "spec.containers[0].securityContext.seccompProfile"} {
		assert.Contains(t, got, want)
	}
	assert.Empty(t, podPolicyProblems("spec", &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}, nil))

	// Capabilities: those the operator allows pass; a flood of others is
	// named in a bounded error (a template typed by hand).
	var many []corev1.Capability
	for range 1000 {
		many = append(many, corev1.Capability(strings.Repeat("X", 1000)))
	}
	caps := &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x", SecurityContext: &corev1.SecurityContext{
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: append([]corev1.Capability{"NET_BIND_SERVICE", "CHOWN"}, many...)}}}}}
	got = strings.Join(podPolicyProblems("spec", caps, nil), "\n")
	assert.Contains(t, got, "and 992 more: a container may add only [NET_BIND_SERVICE CHOWN SETUID SETGID]")
	assert.Less(t, len(got), 600, "bounded")
	assert.NotContains(t, got, "NET_BIND_SERVICE, ", "allowed ones are not named")
}
