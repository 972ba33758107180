package activities

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/deployflow/deployflow/internal/manifest"
)

// Where a pod template is judged before deployflow writes it (issue 20.5):
// every template, from a manifest or typed by hand into a RolloutWorkflow,
// passes the same policy, so a caller who can start a workflow cannot run
// a pod with the node's privileges. A lease namespace's Pod Security level
// (namespace_profile.go) enforces the same again, on the cluster's side.

// ErrPodPolicy: a pod template asks for what no deployflow pod may have.
const ErrPodPolicy = "PodPolicy"

// podPolicyProblems names each field of spec that the policy refuses:
// host namespaces, hostPath volumes, privileged containers, privilege
// escalation, capabilities added beyond allowed (the operator's
// --allow-capabilities; nil is manifest.DefaultAllowedCapabilities) and
// host ports.
func podPolicyProblems(path string, spec *corev1.PodSpec, allowed []string) []string {
	if allowed == nil {
		allowed = manifest.DefaultAllowedCapabilities
	}
	var out []string
	bad := func(field, why string) { out = append(out, fmt.Sprintf("%s.%s: %s", path, field, why)) }
	if spec.HostNetwork {
		bad("hostNetwork", "a pod may not use the node's network")
	}
	if spec.HostPID {
		bad("hostPID", "a pod may not see the node's processes")
	}
	if spec.HostIPC {
		bad("hostIPC", "a pod may not share the node's IPC")
	}
	if spec.ServiceAccountName != "" && spec.ServiceAccountName != "default" {
		bad("serviceAccountName", "a pod runs as its namespace's default ServiceAccount")
	}
	if spec.AutomountServiceAccountToken != nil && *spec.AutomountServiceAccountToken {
		bad("automountServiceAccountToken", "a pod may not ask for the API token (the operator's --mount-service-account-token decides)")
	}
	if sc := spec.SecurityContext; sc != nil {
		for i, sysctl := range sc.Sysctls {
			if !safeSysctls[sysctl.Name] {
				bad(fmt.Sprintf("securityContext.sysctls[%d]", i), fmt.Sprintf("%s is not one of Kubernetes' safe sysctls", sysctl.Name))
			}
		}
		if sp := sc.SeccompProfile; sp != nil && sp.Type == corev1.SeccompProfileTypeUnconfined {
			bad("securityContext.seccompProfile", "a pod may not run unconfined")
		}
		if ap := sc.AppArmorProfile; ap != nil && ap.Type == corev1.AppArmorProfileTypeUnconfined {
			bad("securityContext.appArmorProfile", "a pod may not run unconfined")
		}
		if w := sc.WindowsOptions; w != nil && w.HostProcess != nil && *w.HostProcess {
			bad("securityContext.windowsOptions.hostProcess", "a pod may not run as a host process")
		}
	}
	for i, v := range spec.Volumes {
		if v.HostPath != nil {
			bad(fmt.Sprintf("volumes[%d].hostPath", i), "a pod may not mount the node's files")
		}
	}
	check := func(kind string, i int, c *corev1.Container) {
		p := fmt.Sprintf("%s[%d]", kind, i)
		if sc := c.SecurityContext; sc != nil {
			if sc.Privileged != nil && *sc.Privileged {
				bad(p+".securityContext.privileged", "a container may not be privileged")
			}
			if sc.Capabilities != nil {
				var caps []string
				for _, c := range sc.Capabilities.Add {
					if !slices.Contains(allowed, string(c)) {
						caps = append(caps, quoted(string(c)))
					}
				}
				if len(caps) > maxNamed { // a hand-typed template: bounded
					caps = append(caps[:maxNamed], fmt.Sprintf("and %d more", len(caps)-maxNamed))
				}
				if len(caps) > 0 {
					bad(p+".securityContext.capabilities.add", fmt.Sprintf("%s: a container may add only %v (the operator's --allow-capabilities)", strings.Join(caps, ", "), allowed))
				}
			}
			if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
				bad(p+".securityContext.procMount", "a container may not unmask /proc")
			}
			if sp := sc.SeccompProfile; sp != nil && sp.Type == corev1.SeccompProfileTypeUnconfined {
				bad(p+".securityContext.seccompProfile", "a container may not run unconfined")
			}
			if ap := sc.AppArmorProfile; ap != nil && ap.Type == corev1.AppArmorProfileTypeUnconfined {
				bad(p+".securityContext.appArmorProfile", "a container may not run unconfined")
			}
			if w := sc.WindowsOptions; w != nil && w.HostProcess != nil && *w.HostProcess {
				bad(p+".securityContext.windowsOptions.hostProcess", "a container may not run as a host process")
			}
		}
		for j, port := range c.Ports {
			if port.HostPort != 0 {
				bad(fmt.Sprintf("%s.ports[%d].hostPort", p, j), "a container may not bind the node's ports")
			}
		}
	}
	for i := range spec.InitContainers {
		check("initContainers", i, &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		check("containers", i, &spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		c := corev1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		check("ephemeralContainers", i, &c)
	}
	return out
}

// safeSysctls are Kubernetes' safe sysctls (Pod Security's baseline).
var safeSysctls = map[string]bool{
	"kernel.shm_rmid_forced": true, "net.ipv4.ip_local_port_range": true, "net.ipv4.ip_unprivileged_port_start": true,
	"net.ipv4.tcp_syncookies": true, "net.ipv4.ping_group_range": true, "net.ipv4.ip_local_reserved_ports": true,
	"net.ipv4.tcp_keepalive_time": true, "net.ipv4.tcp_fin_timeout": true, "net.ipv4.tcp_keepalive_intvl": true,
	"net.ipv4.tcp_keepalive_probes": true,
}

// allowedCapabilities are the capabilities a pod template may add back
// (the operator's --allow-capabilities).
func (a *Activities) allowedCapabilities() []string { return a.Limits.Capabilities }

// maxNamed bounds the values of a hand-typed template an error names.
const maxNamed = 8

// quoted is a hand-typed value as an error names it: at most 32 bytes.
func quoted(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
