package manifest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Issue 37.1: a service's probes, as written in YAML, reach its pod
// template: readiness by HTTP, liveness by TCP, startup by a command, with
// their timings; what is left out is left to the API server's defaults.
func TestProbesRenderIntoThePodTemplate(t *testing.T) {
	m, err := Parse([]byte(`lease: shop
services:
  - name: web
    image: nginx:1.27
    ports: [{port: 80}]
    readinessProbe: {httpGet: {path: /healthz, port: 80}, initialDelaySeconds: 2, periodSeconds: 5}
    livenessProbe: {tcpSocket: {port: 80}, failureThreshold: 6}
    startupProbe: {exec: {command: [cat, /tmp/started]}, periodSeconds: 1, failureThreshold: 30}
`))
	require.NoError(t, err)
	require.NoError(t, m.Validate())
	d, err := m.WithDefaults().Deployment("web")
	require.NoError(t, err)
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(80)}},
		InitialDelaySeconds: 2, PeriodSeconds: 5}, c.ReadinessProbe)
	assert.Equal(t, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}},
		FailureThreshold: 6}, c.LivenessProbe)
	assert.Equal(t, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/started"}}},
		PeriodSeconds: 1, FailureThreshold: 30}, c.StartupProbe)

	// Its defaults filled, the manifest holds copies: changing one changes
	// neither the other nor what it renders.
	dm := m.WithDefaults()
	dm.Services[0].StartupProbe.Exec.Command[0] = "false"
	assert.Equal(t, "cat", m.Services[0].StartupProbe.Exec.Command[0])
}

// A service without probes renders none: the pod templates of every
// manifest deployed before probes existed are unchanged, so a worker
// upgrade rolls no pod.
func TestAServiceWithoutProbesRendersNone(t *testing.T) {
	m := &Manifest{Lease: "shop", Services: []Service{{Name: "web", Image: "nginx:1.27"}}}
	d, err := m.WithDefaults().Deployment("web")
	require.NoError(t, err)
	c := d.Spec.Template.Spec.Containers[0]
	assert.Nil(t, c.ReadinessProbe)
	assert.Nil(t, c.LivenessProbe)
	assert.Nil(t, c.StartupProbe)
}

// Every probe field is bounded and named when out of bounds (the bad
// manifests' catalogue has one of each kind; these are the rest).
func TestProbeBounds(t *testing.T) {
	long := make([]string, MaxProbeCommandArgs+1)
	for i := range long {
		long[i] = "x"
	}
	for _, tc := range []struct {
		probe Probe
		path  string
		want  string
	}{
		{Probe{}, "services[0].readinessProbe", "give exactly one of httpGet, tcpSocket and exec (it has 0)"},
		{Probe{HTTPGet: &HTTPGetProbe{Port: 80, Scheme: "FTP"}}, "services[0].readinessProbe.httpGet.scheme", `"FTP": use HTTP or HTTPS`},
		{Probe{HTTPGet: &HTTPGetProbe{Port: 80, Path: "/a b"}}, "services[0].readinessProbe.httpGet.path", "has a space or a control character"},
		{Probe{HTTPGet: &HTTPGetProbe{Port: 80, Path: "/" + string(make([]byte, MaxProbePathLength))}}, "services[0].readinessProbe.httpGet.path", "at most 1024"},
		{Probe{Exec: &ExecProbe{}}, "services[0].readinessProbe.exec.command", "is required"},
		{Probe{Exec: &ExecProbe{Command: long}}, "services[0].readinessProbe.exec.command", "17 arguments: at most 16"},
		{Probe{TCPSocket: &TCPSocketProbe{Port: 80}, InitialDelaySeconds: -1}, "services[0].readinessProbe.initialDelaySeconds", "-1 is out of range: use 0 to 3600"},
		{Probe{TCPSocket: &TCPSocketProbe{Port: 80}, TimeoutSeconds: 61}, "services[0].readinessProbe.timeoutSeconds", "61 is out of range: use 1 to 60"},
		{Probe{TCPSocket: &TCPSocketProbe{Port: 80}, SuccessThreshold: 31}, "services[0].readinessProbe.successThreshold", "31 is out of range: use 1 to 30"},
	} {
		p := tc.probe
		m := &Manifest{Lease: "shop", Services: []Service{{Name: "web", Image: "nginx:1.27", ReadinessProbe: &p}}}
		err := m.Validate()
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.path+": ", tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// Every tenant-set rate has an operator's limit: a probe runs at most
// every --min-probe-period (each probe is the kubelet's work on a node the
// tenant shares); a probe that sets no period takes Kubernetes' 10s.
func TestAProbeFasterThanTheOperatorAllowsIsRefused(t *testing.T) {
	fast := &Manifest{Lease: "shop", Services: []Service{{Name: "web", Image: "nginx:1.27",
		ReadinessProbe: &Probe{TCPSocket: &TCPSocketProbe{Port: 80}, PeriodSeconds: 2},
		LivenessProbe:  &Probe{TCPSocket: &TCPSocketProbe{Port: 80}}}}}
	require.NoError(t, fast.Validate())
	err := fast.CheckLimits(Limits{MinProbePeriod: 5 * time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "services[0].readinessProbe.periodSeconds: 2s: this provider probes a container at most every 5s (the operator's --min-probe-period)")
	assert.NotContains(t, err.Error(), "livenessProbe", "Kubernetes' default period, 10s, is within it")
	assert.NoError(t, fast.CheckLimits(Limits{}), "the default limit is a probe a second")
}
