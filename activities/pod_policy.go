package activities

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
// escalation, added capabilities and host ports.
func podPolicyProblems(path string, spec *corev1.PodSpec) []string {
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
			if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation && sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
				bad(p+".securityContext.allowPrivilegeEscalation", "a container may not escalate to added capabilities")
			}
			if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
				var caps []string
				for _, c := range sc.Capabilities.Add {
					caps = append(caps, string(c))
				}
				bad(p+".securityContext.capabilities.add", fmt.Sprintf("%s: a container may not add capabilities", strings.Join(caps, ", ")))
			}
			if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
				bad(p+".securityContext.procMount", "a container may not unmask /proc")
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
