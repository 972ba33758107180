package manifest

import (
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// When a service's container is ready, alive and started (issue 37.1):
// the kubelet's readiness, liveness and startup probes, as a Deployment
// has them. Readiness is what every rollout gate counts (a pod is
// available once Ready for minReadySeconds), so with a readiness probe a
// rollout judges the service, not the process.

// Probe is how the kubelet checks a service's container: exactly one of
// an HTTP GET, a TCP connection or a command run in the container, and
// when. A field left out takes Kubernetes' default (period 10s, timeout
// 1s, success threshold 1, failure threshold 3).
type Probe struct {
	HTTPGet   *HTTPGetProbe   `json:"httpGet,omitempty"`
	TCPSocket *TCPSocketProbe `json:"tcpSocket,omitempty"`
	Exec      *ExecProbe      `json:"exec,omitempty"`
	// InitialDelaySeconds: seconds after the container starts before the
	// first probe; 0 to MaxProbeInitialDelaySeconds.
	InitialDelaySeconds int32 `json:"initialDelaySeconds,omitempty"`
	// PeriodSeconds: how often; 1 to MaxProbePeriodSeconds.
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`
	// TimeoutSeconds: how long one probe may take; 1 to
	// MaxProbeTimeoutSeconds.
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
	// SuccessThreshold: passes in a row to count as passing again; 1 to
	// MaxProbeThreshold, and 1 for liveness and startup probes.
	SuccessThreshold int32 `json:"successThreshold,omitempty"`
	// FailureThreshold: failures in a row to count as failing; 1 to
	// MaxProbeThreshold.
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

// HTTPGetProbe passes on a response status from 200 to 399.
type HTTPGetProbe struct {
	// Path is the request's path, from "/", printable, at most
	// MaxProbePathLength bytes; "/" if left out.
	Path string `json:"path,omitempty"`
	// Port is the container port, 1 to 65535.
	Port int32 `json:"port"`
	// Scheme is HTTP (the default) or HTTPS.
	Scheme string `json:"scheme,omitempty"`
}

// TCPSocketProbe passes when a connection to the port opens.
type TCPSocketProbe struct {
	// Port is the container port, 1 to 65535.
	Port int32 `json:"port"`
}

// ExecProbe passes when the command, run in the container, exits 0.
type ExecProbe struct {
	// Command is the program and its arguments (no shell): 1 to
	// MaxProbeCommandArgs, each at most MaxProbeArgLength bytes.
	Command []string `json:"command"`
}

// The bounds of a probe's fields.
const (
	MaxProbeInitialDelaySeconds = 3600
	MaxProbePeriodSeconds       = 300
	MaxProbeTimeoutSeconds      = 60
	MaxProbeThreshold           = 30
	MaxProbePathLength          = 1024
	MaxProbeCommandArgs         = 16
	MaxProbeArgLength           = 1024
)

func (p *Probe) clone() *Probe {
	if p == nil {
		return nil
	}
	out := *p
	if p.HTTPGet != nil {
		h := *p.HTTPGet
		out.HTTPGet = &h
	}
	if p.TCPSocket != nil {
		t := *p.TCPSocket
		out.TCPSocket = &t
	}
	if p.Exec != nil {
		out.Exec = &ExecProbe{Command: cloneSlice(p.Exec.Command)}
	}
	return &out
}

// render is p as the container's probe; nil for none. The API server fills
// what it leaves out.
func (p *Probe) render() *corev1.Probe {
	if p == nil {
		return nil
	}
	out := &corev1.Probe{
		InitialDelaySeconds: p.InitialDelaySeconds, PeriodSeconds: p.PeriodSeconds, TimeoutSeconds: p.TimeoutSeconds,
		SuccessThreshold: p.SuccessThreshold, FailureThreshold: p.FailureThreshold,
	}
	switch {
	case p.HTTPGet != nil:
		out.HTTPGet = &corev1.HTTPGetAction{Path: p.HTTPGet.Path, Port: intstr.FromInt32(p.HTTPGet.Port), Scheme: corev1.URIScheme(p.HTTPGet.Scheme)}
	case p.TCPSocket != nil:
		out.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(p.TCPSocket.Port)}
	case p.Exec != nil:
		out.Exec = &corev1.ExecAction{Command: cloneSlice(p.Exec.Command)}
	}
	return out
}

// probes checks a service's probes as written.
func (v *validator) probes(path string, s *Service) {
	v.probe(field(path, "readinessProbe"), s.ReadinessProbe, false)
	v.probe(field(path, "livenessProbe"), s.LivenessProbe, true)
	v.probe(field(path, "startupProbe"), s.StartupProbe, true)
}

// probe checks one probe; oneSuccess: a liveness or startup probe, whose
// success threshold Kubernetes holds at 1.
func (v *validator) probe(path string, p *Probe, oneSuccess bool) {
	if p == nil {
		return
	}
	handlers := 0
	for _, set := range []bool{p.HTTPGet != nil, p.TCPSocket != nil, p.Exec != nil} {
		if set {
			handlers++
		}
	}
	if handlers != 1 {
		v.add(path, "give exactly one of httpGet, tcpSocket and exec (it has %d)", handlers)
	}
	if h := p.HTTPGet; h != nil {
		v.probePort(field(path, "httpGet.port"), h.Port)
		switch {
		case h.Path != "" && !strings.HasPrefix(h.Path, "/"):
			v.add(field(path, "httpGet.path"), "%q: a path starts with /, e.g. /healthz", truncate(h.Path, 40))
		case len(h.Path) > MaxProbePathLength:
			v.add(field(path, "httpGet.path"), "%d bytes: at most %d", len(h.Path), MaxProbePathLength)
		case !printable(h.Path):
			v.add(field(path, "httpGet.path"), "%q has a space or a control character: escape it (%%20)", truncate(h.Path, 40))
		}
		if h.Scheme != "" && h.Scheme != string(corev1.URISchemeHTTP) && h.Scheme != string(corev1.URISchemeHTTPS) {
			v.add(field(path, "httpGet.scheme"), "%q: use HTTP or HTTPS", truncate(h.Scheme, 20))
		}
	}
	if t := p.TCPSocket; t != nil {
		v.probePort(field(path, "tcpSocket.port"), t.Port)
	}
	if e := p.Exec; e != nil {
		cp := field(path, "exec.command")
		switch {
		case len(e.Command) == 0:
			v.add(cp, "is required: give the program and its arguments, e.g. [cat, /tmp/ready]")
		case len(e.Command) > MaxProbeCommandArgs:
			v.add(cp, "%d arguments: at most %d", len(e.Command), MaxProbeCommandArgs)
		default:
			for i, a := range e.Command {
				switch {
				case len(a) > MaxProbeArgLength:
					v.add(index(cp, i), "%d bytes: at most %d", len(a), MaxProbeArgLength)
				case i == 0 && a == "":
					v.add(index(cp, i), "is empty: give the program to run, e.g. cat")
				}
			}
		}
	}
	v.probeField(field(path, "initialDelaySeconds"), p.InitialDelaySeconds, 0, MaxProbeInitialDelaySeconds)
	v.probeField(field(path, "periodSeconds"), p.PeriodSeconds, 1, MaxProbePeriodSeconds)
	v.probeField(field(path, "timeoutSeconds"), p.TimeoutSeconds, 1, MaxProbeTimeoutSeconds)
	v.probeField(field(path, "failureThreshold"), p.FailureThreshold, 1, MaxProbeThreshold)
	switch {
	case oneSuccess && p.SuccessThreshold > 1:
		v.add(field(path, "successThreshold"), "%d: a liveness or startup probe passes on one success: give 1, or leave it out", p.SuccessThreshold)
	default:
		v.probeField(field(path, "successThreshold"), p.SuccessThreshold, 1, MaxProbeThreshold)
	}
}

func (v *validator) probePort(path string, port int32) {
	if port < 1 || port > 65535 {
		v.add(path, "%d is not a port: give the container port the check reaches, 1-65535", port)
	}
}

// probeField checks a probe's number: 0 (left out: Kubernetes' default)
// or min to max.
func (v *validator) probeField(path string, n, min, max int32) {
	if n != 0 && (n < min || n > max) {
		v.add(path, "%d is out of range: use %d to %d, or leave it out for Kubernetes' default", n, min, max)
	}
}

func printable(s string) bool {
	for _, r := range s {
		if r == ' ' || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// kubeProbePeriod is the period of a probe that sets none (Kubernetes').
const kubeProbePeriod = 10 * time.Second

// checkProbes adds a problem for each probe of m that probes more often
// than every minPeriod (the operator's --min-probe-period): each probe is
// the kubelet's work on the node the tenant shares.
func (m *Manifest) checkProbes(v *problems, minPeriod time.Duration) {
	for i := range m.Services {
		s := &m.Services[i]
		for _, p := range []struct {
			name  string
			probe *Probe
		}{{"readinessProbe", s.ReadinessProbe}, {"livenessProbe", s.LivenessProbe}, {"startupProbe", s.StartupProbe}} {
			if p.probe == nil {
				continue
			}
			period := kubeProbePeriod
			if p.probe.PeriodSeconds > 0 {
				period = time.Duration(p.probe.PeriodSeconds) * time.Second
			}
			if period < minPeriod {
				v.add(field(field(index("services", i), p.name), "periodSeconds"), "%s: this provider probes a container at most every %s (the operator's --min-probe-period)", period, minPeriod)
			}
		}
	}
}
