// Package manifest is deployflow's deploy manifest: the description of one
// tenant lease's group of services, written by the tenant in YAML or JSON and
// passed as-is (as JSON) to the deploy workflow.
//
// The package is pure: no I/O, no clients, no Temporal. It parses a manifest
// strictly (Parse), fills defaults (WithDefaults), checks it (Validate) and
// turns it into the Kubernetes objects deployflow applies or hands to the
// rollout engine (Deployment, ClusterIPServices, Ingress,
// LoadBalancerServices). Every function is deterministic: the same manifest
// always gives the same objects, so they are safe to compute inside a
// workflow.
package manifest

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Labels and annotations deployflow puts on the objects it derives from a
// manifest.
const (
	// LeaseLabel carries the lease ID on every object and pod template.
	LeaseLabel = "deployflow.dev/lease"
	// ServiceLabel carries the service name on every per-service object and
	// pod template. The rollout engine selects a service's ReplicaSets by it,
	// so it must stay exactly "deployflow.dev/service".
	ServiceLabel = "deployflow.dev/service"
	// IPEndpointLabel carries the IP endpoint name on LoadBalancer Services.
	IPEndpointLabel = "deployflow.dev/ip-endpoint"
	// ManagedByLabel is the well-known label naming the managing tool; its
	// value on deployflow's objects is ManagedBy.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedBy is ManagedByLabel's value.
	ManagedBy = "deployflow"
	// AppLabel is the pod label Deployments and Services select on; its value
	// is the service name.
	AppLabel = "app"
	// DeclaredIPAnnotation records on a LoadBalancer Service the IP its IP
	// endpoint was declared with.
	DeclaredIPAnnotation = "deployflow.dev/declared-ip"
	// IngressName is the name of a lease's single Ingress.
	IngressName = "lease-ingress"
	// NamespacePrefix prefixes a lease ID to give its namespace.
	NamespacePrefix = "lease-"
)

// Protocols and rollout strategies a manifest may name.
const (
	ProtocolTCP = "TCP"
	ProtocolUDP = "UDP"

	StrategyRollingUpdate = "RollingUpdate"
	StrategyRecreate      = "Recreate"
)

// Defaults WithDefaults fills in.
const (
	DefaultReplicas                int32 = 1
	DefaultProtocol                      = ProtocolTCP
	DefaultStrategy                      = StrategyRollingUpdate
	DefaultMaxSurge                      = "25%"
	DefaultMaxUnavailable                = "25%"
	DefaultProgressDeadlineSeconds int32 = 600
	DefaultRevisionHistoryLimit    int32 = 10
	// MaxRevisionHistoryLimit bounds the old ReplicaSets a service keeps,
	// whatever its revisionHistoryLimit says (issue 35.5: unbounded, each
	// deploy left one more in etcd; the lease's ReplicaSet quota holds
	// them too).
	MaxRevisionHistoryLimit int32 = 50
	DefaultAutoRollback           = true
)

// Limits Validate enforces.
const (
	// MaxLeaseLength keeps Namespace(lease) a valid DNS label.
	MaxLeaseLength = 40
	// MaxServiceNameLength leaves room in object names derived from a
	// service name (ReplicaSets, pods, "<service>-ip-<endpoint>").
	MaxServiceNameLength = 40
	// MaxReplicas bounds a service's replica count.
	MaxReplicas = 1000
	// MaxHostnameLength is DNS's limit on a fully qualified name.
	MaxHostnameLength = 253
	// MaxSize bounds the input Parse accepts, in bytes: a lease's workflow
	// carries up to four manifests across continue-as-new, in one payload
	// under Temporal's 2 MiB limit (workflows/lease/carry_budget.go).
	MaxSize = 256 << 10
	// legacyMaxSize is MaxSize before issue 20 (ParseLenient).
	legacyMaxSize = 1 << 20
)

// Manifest describes one tenant lease's group of services. Its JSON form is
// the deploy workflow's input; Parse reads it from YAML or JSON.
type Manifest struct {
	// Lease is the lease ID: a DNS-1123 label of at most 40 characters. The
	// lease's objects live in namespace Namespace(Lease).
	Lease string `json:"lease"`
	// RequireApproval makes the deploy wait for an approval before it
	// changes the cluster.
	RequireApproval bool `json:"requireApproval,omitempty"`
	// Services are the lease's services; names are unique.
	Services []Service `json:"services"`
	// Placement, if set, deploys the lease to several clusters in waves
	// (placement/placement.go); without it, to the worker's own cluster.
	Placement *Placement `json:"placement,omitempty"`
}

// Service is one service of a lease: a Deployment of identical pods with one
// container, and optionally a ClusterIP Service, Ingress rules and
// LoadBalancer Services for its ports.
type Service struct {
	// Name is a DNS-1035 label of at most 40 characters, unique in the
	// manifest. It names the Deployment, the container and the Services.
	Name string `json:"name"`
	// Image is the container image reference:
	// [registry[:port]/]path[:tag][@sha256:<64 hex>].
	Image string `json:"image"`
	// Replicas defaults to 1; 0 to 1000.
	Replicas *int32 `json:"replicas,omitempty"`
	// Command overrides the image's entrypoint.
	Command []string `json:"command,omitempty"`
	// Args overrides the image's command arguments.
	Args []string `json:"args,omitempty"`
	// Env is the container's environment; the container lists it sorted by
	// name.
	Env map[string]string `json:"env,omitempty"`
	// Resources are the container's requests, equal to its limits.
	Resources *Resources `json:"resources,omitempty"`
	// Ports the service listens on; port numbers are unique in a service.
	Ports []Port `json:"ports,omitempty"`
	// Rollout tunes how a new version replaces the running one.
	Rollout *Rollout `json:"rollout,omitempty"`
	// PodLabels are extra pod-template labels. app, pod-template-hash and
	// deployflow's own lease and service labels are reserved.
	PodLabels map[string]string `json:"podLabels,omitempty"`
	// PodAnnotations are extra pod-template annotations.
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// Security is how the container runs (security.go): hardened, with
	// what the manifest relaxes within the operator's bounds.
	Security *Security `json:"security,omitempty"`
	// ReadinessProbe says when a pod may take traffic and counts as
	// available to a rollout; LivenessProbe when the kubelet restarts its
	// container; StartupProbe holds the other two back until the container
	// has started (probes.go).
	ReadinessProbe *Probe `json:"readinessProbe,omitempty"`
	LivenessProbe  *Probe `json:"livenessProbe,omitempty"`
	StartupProbe   *Probe `json:"startupProbe,omitempty"`
	// Credentials are the login to the image's private registry, and
	// SecretEnv environment variables whose values are secret
	// (secrets.go): in the cluster each is a Secret the pod refers to, in
	// Temporal only encrypted, and everything deployflow shows them as
	// Redacted.
	Credentials *Credentials      `json:"credentials,omitempty"`
	SecretEnv   map[string]string `json:"secretEnv,omitempty"`
	// Volumes are the disks the container mounts (storage.go): ephemeral,
	// or persistent, which makes the service a StatefulSet.
	Volumes []Volume `json:"volumes,omitempty"`
	// PodManagementPolicy is a stateful service's StatefulSet's:
	// OrderedReady (the default: one pod at a time, each Ready before the
	// next, as upstream's default) or Parallel (its pods started and
	// deleted at once). Fixed once the StatefulSet is created.
	PodManagementPolicy string `json:"podManagementPolicy,omitempty"`
}

// Resources are a container's CPU, memory and ephemeral storage (the
// node's disk its logs, writable layer and emptyDir volumes take), as
// Kubernetes quantities ("500m", "2", "256Mi", "1Gi"). Each is both the
// request and the limit; an empty one is left unset (ephemeral storage:
// the operator's --lease-default-limit-ephemeral-storage). All count
// against the lease namespace's quota. GPU is the GPUs each replica
// takes (gpu.go).
type Resources struct {
	CPU              string `json:"cpu,omitempty"`
	Memory           string `json:"memory,omitempty"`
	EphemeralStorage string `json:"ephemeralStorage,omitempty"`
	GPU              *GPU   `json:"gpu,omitempty"`
}

// Port is a port a service listens on.
type Port struct {
	// Port is the Service port, 1 to 65535, unique in the service.
	Port int32 `json:"port"`
	// TargetPort is the container port; it defaults to Port.
	TargetPort int32 `json:"targetPort,omitempty"`
	// Protocol is TCP (the default) or UDP.
	Protocol string `json:"protocol,omitempty"`
	// Expose makes the port reachable from outside the cluster.
	Expose *Expose `json:"expose,omitempty"`
}

// Expose says how a port is reached from outside the cluster: by HTTP host
// names through the lease's Ingress, on a named global IP endpoint through a
// LoadBalancer Service, or both.
type Expose struct {
	// HTTP routes host names to the port through the lease's Ingress (TCP
	// ports only).
	HTTP *HTTPExpose `json:"http,omitempty"`
	// IP names a global IP endpoint (a DNS-1123 label); the port is served
	// on that endpoint's IP by the LoadBalancer Service
	// "<service>-ip-<endpoint>".
	IP string `json:"ip,omitempty"`
}

// HTTPExpose lists the host names routed to a port.
type HTTPExpose struct {
	// Hostnames are lowercase, fully qualified DNS names without wildcards,
	// unique across the manifest.
	Hostnames []string `json:"hostnames"`
}

// Rollout tunes a service's Deployment strategy and the rollout engine.
type Rollout struct {
	// Strategy is RollingUpdate (the default), Recreate, Canary or BlueGreen.
	Strategy string `json:"strategy,omitempty"`
	// MaxSurge is how many pods (an integer, or a percentage of replicas
	// like "25%", the default) a rolling update may add above replicas.
	// Not allowed with Recreate.
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
	// MaxUnavailable is how many pods (an integer or a percentage, default
	// "25%") a rolling update may take below replicas. It and MaxSurge may
	// not both be zero. Not allowed with Recreate.
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// MinReadySeconds is how long a new pod must be ready to count as
	// available.
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`
	// ProgressDeadlineSeconds (default 600, more than MinReadySeconds) is
	// how long a rollout may go without progress before it fails.
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
	// RevisionHistoryLimit (default 10) is how many old ReplicaSets to
	// keep, at most MaxRevisionHistoryLimit.
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
	// AutoRollback (default true) restores the last good revision when the
	// progress deadline passes.
	AutoRollback *bool `json:"autoRollback,omitempty"`
	// Steps of a Canary (strategy Canary only).
	Steps []CanaryStep `json:"steps,omitempty"`
	// Analysis is a Canary's background analysis: measured every interval
	// while its steps run; a failed verdict aborts the canary, an
	// inconclusive one holds it before its next step.
	Analysis *Analysis `json:"analysis,omitempty"`
	// BlueGreen settings (strategy BlueGreen only).
	BlueGreen *BlueGreen `json:"blueGreen,omitempty"`
	// ScaleDownDelaySeconds (strategy Canary, where the operator routes
	// through a Gateway; default 30, as Argo Rollouts') is how long the
	// version that lost its requests keeps its pods: a Gateway's proxies
	// apply a weight moments after they accept it.
	ScaleDownDelaySeconds *int32 `json:"scaleDownDelaySeconds,omitempty"`
}

// TrafficScaleDownDelay is a canary's ScaleDownDelaySeconds, defaulted.
func (r *Rollout) TrafficScaleDownDelay() int32 {
	if r == nil || r.ScaleDownDelaySeconds == nil {
		return DefaultScaleDownDelaySeconds
	}
	return *r.ScaleDownDelaySeconds
}

// Namespace is the namespace of a lease's objects: "lease-" + the lease ID.
func Namespace(lease string) string { return NamespacePrefix + lease }

// Lookup returns the service named name, with defaults filled, and whether
// there is one.
func (m *Manifest) Lookup(name string) (Service, bool) {
	if m == nil {
		return Service{}, false
	}
	for i := range m.Services {
		if m.Services[i].Name == name {
			return m.Services[i].withDefaults(), true
		}
	}
	return Service{}, false
}

// ServiceNames lists the services' names in manifest order.
func (m *Manifest) ServiceNames() []string {
	if m == nil {
		return nil
	}
	names := make([]string, 0, len(m.Services))
	for _, s := range m.Services {
		names = append(names, s.Name)
	}
	return names
}

// Hostnames lists every HTTP host name the manifest exposes, sorted and
// without duplicates.
func (m *Manifest) Hostnames() []string {
	if m == nil {
		return nil
	}
	var out []string
	for _, s := range m.Services {
		for _, p := range s.Ports {
			if p.Expose != nil && p.Expose.HTTP != nil {
				out = append(out, p.Expose.HTTP.Hostnames...)
			}
		}
	}
	return sortedUnique(out)
}

// IPEndpoints lists every IP endpoint the manifest uses, sorted and without
// duplicates. The deploy needs an IP for each to build LoadBalancerServices.
func (m *Manifest) IPEndpoints() []string {
	if m == nil {
		return nil
	}
	var out []string
	for _, s := range m.Services {
		out = append(out, s.ipEndpoints()...)
	}
	return sortedUnique(out)
}

// ipEndpoints lists the IP endpoints s's ports use, sorted and unique.
func (s *Service) ipEndpoints() []string {
	var out []string
	for _, p := range s.Ports {
		if p.Expose != nil && p.Expose.IP != "" {
			out = append(out, p.Expose.IP)
		}
	}
	return sortedUnique(out)
}

// sortedUnique sorts in and drops repeats; nil for an empty list.
func sortedUnique(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
