package manifest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kptr "k8s.io/utils/ptr"
)

// How a service's container runs (issue 35.4): hardened by default, as the
// Pod Security Standards' restricted profile asks, with what a manifest may
// relax spelled out in its security section and bounded by the operator.

// Security is how a service's container runs. Every deploy accepted since
// issue 35.4 has one (Hardened fills it where the manifest has none), so
// its pods run with the runtime's default seccomp profile, without
// privilege escalation and with every Linux capability dropped. A lease's
// last-known-good manifest from before has none: its pods keep the
// template they ran with, so a return to it reuses its ReplicaSet.
type Security struct {
	// RunAsNonRoot makes the kubelet refuse to start the container as
	// root. The operator's restricted Pod Security level requires it.
	RunAsNonRoot bool `json:"runAsNonRoot,omitempty"`
	// RunAsUser is the UID the container runs as (0 to 2147483647; 0 is
	// root, refused with RunAsNonRoot); unset, the image's user.
	RunAsUser *int64 `json:"runAsUser,omitempty"`
	// Capabilities are Linux capabilities added back after all are
	// dropped, without the CAP_ prefix (e.g. NET_BIND_SERVICE, to bind a
	// port below 1024). The operator allows which (--allow-capabilities).
	Capabilities []string `json:"capabilities,omitempty"`
	// ReadOnlyRootFilesystem mounts the image's filesystem read-only.
	ReadOnlyRootFilesystem bool `json:"readOnlyRootFilesystem,omitempty"`
}

// MaxCapabilities bounds a service's added capabilities.
const MaxCapabilities = 16

// maxUID is the largest UID Kubernetes accepts.
const maxUID = 2147483647

// capabilityName is a Linux capability as Kubernetes spells it.
var capabilityName = regexp.MustCompile(`^[A-Z][A-Z_]{1,31}$`)

// Hardened is a copy of m in which every service without a security
// section has the default one: how the lease's workflow accepts a
// manifest sent to it, so that the manifest it records renders the pods
// that ran (a copy, never m itself).
func (m *Manifest) Hardened() *Manifest {
	if m == nil {
		return nil
	}
	out := *m
	out.Services = slices.Clone(m.Services)
	for i := range out.Services {
		if out.Services[i].Security == nil {
			out.Services[i].Security = &Security{}
		}
	}
	return &out
}

func (s *Security) clone() *Security {
	if s == nil {
		return nil
	}
	out := *s
	out.RunAsUser = clonePtr(s.RunAsUser)
	out.Capabilities = cloneSlice(s.Capabilities)
	return &out
}

// podSecurity is the pod's and the container's security contexts of a
// service with security section s; none for a manifest from before it.
func (s *Security) podSecurity() (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	if s == nil {
		return nil, nil
	}
	pod := &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if s.RunAsNonRoot {
		pod.RunAsNonRoot = kptr.To(true)
	}
	pod.RunAsUser = clonePtr(s.RunAsUser)
	c := &corev1.SecurityContext{
		AllowPrivilegeEscalation: kptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	for _, name := range s.Capabilities {
		c.Capabilities.Add = append(c.Capabilities.Add, corev1.Capability(name))
	}
	if s.ReadOnlyRootFilesystem {
		c.ReadOnlyRootFilesystem = kptr.To(true)
	}
	return pod, c
}

// security checks a service's security section as written.
func (v *validator) security(path string, s *Security) {
	if s == nil {
		return
	}
	if u := s.RunAsUser; u != nil {
		switch {
		case *u < 0 || *u > maxUID:
			v.add(field(path, "runAsUser"), "%d is not a UID: use 0 to %d (0 is root)", *u, maxUID)
		case *u == 0 && s.RunAsNonRoot:
			v.add(field(path, "runAsUser"), "0 is root, and runAsNonRoot is set: give a non-zero UID, or leave runAsUser out to run as the image's user")
		}
	}
	if len(s.Capabilities) > MaxCapabilities {
		v.add(field(path, "capabilities"), "%d capabilities: at most %d", len(s.Capabilities), MaxCapabilities)
		return
	}
	seen := map[string]bool{}
	for i, c := range s.Capabilities {
		p := index(field(path, "capabilities"), i)
		switch {
		case !capabilityName.MatchString(c):
			v.add(p, "%q is not a capability name: write it in capitals without CAP_, e.g. NET_BIND_SERVICE", truncate(c, 40))
		case strings.HasPrefix(c, "CAP_"):
			v.add(p, "%q: write it without CAP_, e.g. %s", c, c[4:])
		case c == "ALL":
			v.add(p, "ALL is every capability: name the few the service needs, e.g. NET_BIND_SERVICE")
		case seen[c]:
			v.add(p, "%s is listed twice", c)
		}
		seen[c] = true
	}
}

// Pod Security levels an operator runs lease namespaces at
// (--pod-security).
const (
	PodSecurityPrivileged = "privileged"
	PodSecurityBaseline   = "baseline"
	PodSecurityRestricted = "restricted"
)

// DefaultAllowedCapabilities are the capabilities a manifest may add back
// unless the operator allows others: what a web server needs that starts
// as root, binds a port below 1024 and drops to its own user (the
// official nginx image: CHOWN for its cache directories, SETUID and
// SETGID to drop), all within Pod Security's baseline level.
var DefaultAllowedCapabilities = []string{"NET_BIND_SERVICE", "CHOWN", "SETUID", "SETGID"}

// baselineCapabilities are the capabilities Pod Security's baseline level
// lets a container add; restricted lets it add only NET_BIND_SERVICE.
var baselineCapabilities = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// checkSecurity adds a problem for each service whose security section
// asks for more than the operator allows: a capability not in allowed
// (nil: DefaultAllowedCapabilities) or beyond what the namespaces' Pod
// Security level admits, or, at restricted, a container that may run as
// root. The pods would otherwise be refused by the API server one by one,
// after the deploy had written its objects.
func (m *Manifest) checkSecurity(v *problems, level string, allowed []string) {
	if allowed == nil {
		allowed = DefaultAllowedCapabilities
	}
	if level == "" {
		level = PodSecurityBaseline
	}
	for i := range m.Services {
		s := &m.Services[i]
		p := field(index("services", i), "security")
		sec := s.Security
		if sec == nil {
			sec = &Security{}
		}
		switch {
		case level != PodSecurityRestricted || sec.RunAsNonRoot:
		case s.Security == nil:
			v.add(field(p, "runAsNonRoot"), "this manifest was taken before its pods ran hardened, and this provider now runs pods at the restricted Pod Security level, where a container may not run as root: deploy it again with runAsNonRoot: true (the operator's --pod-security)")
		default:
			v.add(field(p, "runAsNonRoot"), "this provider runs pods at the restricted Pod Security level, where a container may not run as root: set runAsNonRoot: true, with runAsUser: <a non-zero UID> if the image's user is root (the operator's --pod-security)")
		}
		for j, c := range sec.Capabilities {
			cp := index(field(p, "capabilities"), j)
			switch {
			case !slices.Contains(allowed, c):
				v.add(cp, "%s: this provider lets a container add only %v (the operator's --allow-capabilities)", truncate(c, 40), allowed)
			case level == PodSecurityRestricted && c != "NET_BIND_SERVICE":
				v.add(cp, "%s: at the restricted Pod Security level a container may add only NET_BIND_SERVICE (the operator's --pod-security)", c)
			case level == PodSecurityBaseline && !slices.Contains(baselineCapabilities, c):
				v.add(cp, "%s: at the baseline Pod Security level a container may add only %v (the operator's --pod-security)", c, baselineCapabilities)
			}
		}
	}
}

// CheckCapabilities checks the operator's allowed capabilities: names as
// Kubernetes spells them, never ALL.
func (l Limits) CheckCapabilities() error {
	for _, c := range l.Capabilities {
		if !capabilityName.MatchString(c) || c == "ALL" || strings.HasPrefix(c, "CAP_") {
			return fmt.Errorf("%q: want capability names without CAP_, e.g. NET_BIND_SERVICE", c)
		}
	}
	return nil
}
