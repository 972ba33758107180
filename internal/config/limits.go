package config

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/deployflow/deployflow/internal/manifest"
)

// LeaseLimits are the operator's bounds on one lease (issue 20.4): what a
// manifest may ask for (manifest.Limits) and the profile of its namespace
// (a ResourceQuota, a LimitRange, a Pod Security Admission level).
type LeaseLimits struct {
	Manifest manifest.Limits
	// ReservedKeyPrefixes (--reserved-key-prefixes) are the label and
	// annotation prefixes a tenant's pods may not use; AllowPodKeys
	// (--allow-pod-keys) the reserved keys allowed anyway.
	ReservedKeyPrefixes, AllowPodKeys string
	// Namespace is the profile every lease namespace gets.
	Namespace NamespaceProfile
	// MountServiceAccountToken (--mount-service-account-token) lets lease
	// pods mount their service account's API token.
	MountServiceAccountToken bool
	// AllowCapabilities (--allow-capabilities) are the Linux capabilities
	// a manifest's security section may add back, comma-separated.
	AllowCapabilities string
	// GPUModels (--gpu-models) are the GPUs this provider offers,
	// comma-separated vendor/model or vendor/* (manifest.ParseGPUModels).
	GPUModels string
	// StorageClasses (--storage-classes) are the storage classes a
	// persistent volume may name, comma-separated (issue 39.1).
	StorageClasses string
}

// NamespaceProfile is what a lease namespace enforces, whatever its
// manifest says: Pod Security Admission's level (enforce label), a
// ResourceQuota on the whole namespace, and a LimitRange giving each
// container default requests and limits.
type NamespaceProfile struct {
	PodSecurity string `json:"podSecurity"` // baseline (default), restricted or privileged
	QuotaCPU    string `json:"quotaCPU"`    // requests.cpu and limits.cpu of the namespace
	QuotaMemory string `json:"quotaMemory"` // requests.memory and limits.memory
	QuotaPods   string `json:"quotaPods"`   // pods
	// Node and cluster resources (issue 35.5): limits.ephemeral-storage
	// (node disk: logs, writable layers, emptyDir), services.nodeports
	// (a cluster's NodePort range is shared by every lease; each port of
	// a declared IP endpoint takes one), services.loadbalancers, and Jobs
	// (analysis checks), and the objects a lease's deploys write that its
	// manifest only bounds: Services and ReplicaSets (revision history).
	// The disk quota holds on requests.ephemeral-storage too.
	QuotaEphemeralStorage string `json:"quotaEphemeralStorage"`
	QuotaNodePorts        string `json:"quotaNodePorts"`
	QuotaLoadBalancers    string `json:"quotaLoadBalancers"`
	QuotaJobs             string `json:"quotaJobs"`
	QuotaServices         string `json:"quotaServices"`
	QuotaReplicaSets      string `json:"quotaReplicaSets"`
	// QuotaGPUs is the GPUs (requests of each vendor's extended
	// resource) one lease namespace may take where --gpu-models offers
	// any (0 where it offers none): room for --max-gpus and a rolling
	// update's surge.
	QuotaGPUs string `json:"quotaGPUs"`
	// QuotaStorage and QuotaClaims are the persistent storage
	// (requests.storage) and the PersistentVolumeClaims one lease
	// namespace may hold where --storage-classes offers any (0 where it
	// offers none): room for --max-storage.
	QuotaStorage string `json:"quotaStorage"`
	QuotaClaims  string `json:"quotaClaims"`
	// DefaultRequestCPU/Memory and DefaultLimitCPU/Memory are the
	// LimitRange's per-container defaults (a pod that sets none gets them,
	// so the quota can count it).
	DefaultRequestCPU    string `json:"defaultRequestCPU"`
	DefaultRequestMemory string `json:"defaultRequestMemory"`
	DefaultLimitCPU      string `json:"defaultLimitCPU"`
	DefaultLimitMemory   string `json:"defaultLimitMemory"`
	// DefaultLimitEphemeralStorage is a container's ephemeral-storage
	// limit when its manifest sets none (the kubelet evicts a pod past it).
	DefaultLimitEphemeralStorage string `json:"defaultLimitEphemeralStorage"`
	// The lease's NetworkPolicy (issue 35.3), comma-separated lists:
	// IngressFrom, the namespaces whose pods may reach a lease's pods
	// besides its own (ingress controllers, gateways, the worker's for its
	// HTTP checks); EgressDeny, the address ranges a lease's pods may not
	// reach (the cluster's pod, service and node ranges, metadata
	// addresses); EgressAllow, ranges inside those they may reach anyway;
	// DNS, the cluster DNS pods they may ask, as namespace/label=value.
	IngressFrom string `json:"ingressFrom"`
	EgressDeny  string `json:"egressDeny"`
	EgressAllow string `json:"egressAllow"`
	DNS         string `json:"dns"`
	// LoadBalancersWithoutNodePorts renders a declared IP endpoint's
	// LoadBalancer Service with allocateLoadBalancerNodePorts false, where
	// the cluster's load balancer reaches pods directly: its ports then
	// take none of the cluster's shared NodePort range (issue 35.5).
	LoadBalancersWithoutNodePorts bool `json:"loadBalancersWithoutNodePorts,omitempty"`
}

// DefaultEgressDeny is what a lease's pods may not reach unless the
// operator says otherwise: every private, shared, loopback and link-local
// range (where clusters put their pods, Services and nodes, and clouds
// their metadata endpoints, 169.254.169.254 and fd00:ec2::254).
const DefaultEgressDeny = "0.0.0.0/8,10.0.0.0/8,100.64.0.0/10,127.0.0.0/8,169.254.0.0/16,172.16.0.0/12,192.168.0.0/16,fc00::/7,fe80::/10"

// None, as --lease-ingress-from or --lease-egress-deny, is an empty list
// (an empty value is the default).
const None = "none"

// IngressNamespaces is IngressFrom as a list.
func (p NamespaceProfile) IngressNamespaces() []string { return listOrNone(p.IngressFrom) }

// EgressDenied is EgressDeny as a list.
func (p NamespaceProfile) EgressDenied() []string { return listOrNone(p.EgressDeny) }

func listOrNone(s string) []string {
	if strings.TrimSpace(s) == None {
		return nil
	}
	return list(s)
}

// EgressAllowed is EgressAllow as a list.
func (p NamespaceProfile) EgressAllowed() []string { return list(p.EgressAllow) }

// DNSPeer is DNS split: the cluster DNS pods' namespace, and their label.
func (p NamespaceProfile) DNSPeer() (namespace, key, value string, err error) {
	ns, sel, ok := strings.Cut(p.DNS, "/")
	k, v, ok2 := strings.Cut(sel, "=")
	if !ok || !ok2 || ns == "" || k == "" || v == "" {
		return "", "", "", fmt.Errorf("--lease-dns %q: want namespace/label=value, e.g. kube-system/k8s-app=kube-dns", p.DNS)
	}
	return ns, k, v, nil
}

// DefaultNamespaceProfile is a lease namespace's profile unless the
// operator sets another.
func DefaultNamespaceProfile() NamespaceProfile {
	return NamespaceProfile{
		PodSecurity: "baseline", QuotaCPU: "16", QuotaMemory: "32Gi", QuotaPods: "200",
		QuotaEphemeralStorage: "100Gi", QuotaNodePorts: "16", QuotaLoadBalancers: "4", QuotaJobs: "100",
		QuotaServices: "64", QuotaReplicaSets: "1024", QuotaGPUs: "16", QuotaStorage: "100Gi", QuotaClaims: "64",
		DefaultRequestCPU: "100m", DefaultRequestMemory: "128Mi", DefaultLimitCPU: "1", DefaultLimitMemory: "512Mi",
		DefaultLimitEphemeralStorage: "1Gi",
		IngressFrom:                  "ingress-nginx", EgressDeny: DefaultEgressDeny, DNS: "kube-system/k8s-app=kube-dns",
	}
}

// RegisterFlags binds l to fs, with defaults from the environment.
func (l *LeaseLimits) RegisterFlags(fs *flag.FlagSet) {
	d := manifest.DefaultLimits()
	for _, k := range []struct {
		v         *int
		name, env string
		def       int
		usage     string
	}{
		{&l.Manifest.Services, "max-services", "DEPLOYFLOW_MAX_SERVICES", d.Services, "services in one lease's manifest"},
		{&l.Manifest.PortsPerService, "max-ports", "DEPLOYFLOW_MAX_PORTS", d.PortsPerService, "ports of one service"},
		{&l.Manifest.IPEndpoints, "max-ip-endpoints", "DEPLOYFLOW_MAX_IP_ENDPOINTS", d.IPEndpoints, "declared IP endpoints of one lease (each takes an address of --ip-pool)"},
		{&l.Manifest.Hostnames, "max-hostnames", "DEPLOYFLOW_MAX_HOSTNAMES", d.Hostnames, "hostnames of one lease"},
		{&l.Manifest.CanarySteps, "max-canary-steps", "DEPLOYFLOW_MAX_CANARY_STEPS", d.CanarySteps, "steps of one canary"},
		{&l.Manifest.GPUs, "max-gpus", "DEPLOYFLOW_MAX_GPUS", d.GPUs, "GPUs of one lease (units times replicas, all its services), where --gpu-models offers any"},
	} {
		fs.IntVar(k.v, k.name, envInt(k.env, k.def), fmt.Sprintf("worker: at most this many %s (env %s)", k.usage, k.env))
	}
	for _, k := range []struct {
		v         *int32
		name, env string
		def       int32
		usage     string
	}{
		{&l.Manifest.TotalReplicas, "max-replicas", "DEPLOYFLOW_MAX_REPLICAS", d.TotalReplicas, "replicas of all a lease's services together"},
		{&l.Manifest.MaxCount, "max-analysis-count", "DEPLOYFLOW_MAX_ANALYSIS_COUNT", d.MaxCount, "measurements of one analysis"},
	} {
		*k.v = int32(envInt(k.env, int(k.def)))
		fs.Var((*int32Value)(k.v), k.name, fmt.Sprintf("worker: at most this many %s (env %s; default %d)", k.usage, k.env, k.def))
	}
	fs.Int64Var(&l.Manifest.MaxJobSeconds, "max-job-seconds", int64(envInt("DEPLOYFLOW_MAX_JOB_SECONDS", int(d.MaxJobSeconds))), "worker: an analysis Job runs at most this many seconds (its activeDeadlineSeconds) (env DEPLOYFLOW_MAX_JOB_SECONDS)")
	interval := d.MinInterval
	if v, err := time.ParseDuration(os.Getenv("DEPLOYFLOW_MIN_ANALYSIS_INTERVAL")); err == nil {
		interval = v
	}
	fs.DurationVar(&l.Manifest.MinInterval, "min-analysis-interval", interval, "worker: an analysis measures at most this often (env DEPLOYFLOW_MIN_ANALYSIS_INTERVAL)")
	probePeriod := d.MinProbePeriod
	if v, err := time.ParseDuration(os.Getenv("DEPLOYFLOW_MIN_PROBE_PERIOD")); err == nil {
		probePeriod = v
	}
	fs.DurationVar(&l.Manifest.MinProbePeriod, "min-probe-period", probePeriod, "worker: a service's readiness, liveness or startup probe runs at most this often (its periodSeconds) (env DEPLOYFLOW_MIN_PROBE_PERIOD)")

	fs.StringVar(&l.ReservedKeyPrefixes, "reserved-key-prefixes", env("DEPLOYFLOW_RESERVED_KEY_PREFIXES", strings.Join(manifest.DefaultReservedPrefixes, ",")), "worker: comma-separated label/annotation prefixes (and their subdomains) a tenant's pods and analysis Jobs may not use (env DEPLOYFLOW_RESERVED_KEY_PREFIXES)")
	fs.StringVar(&l.AllowPodKeys, "allow-pod-keys", os.Getenv("DEPLOYFLOW_ALLOW_POD_KEYS"), "worker: comma-separated prefixed pod keys a tenant may use, exact (a reserved one too, e.g. the local stack's kwok knobs deployflow.dev/ready-after) or by prefix ending in / (example.com/); keys without a prefix are always the tenant's (env DEPLOYFLOW_ALLOW_POD_KEYS)")
	fs.BoolVar(&l.MountServiceAccountToken, "mount-service-account-token", os.Getenv("DEPLOYFLOW_MOUNT_SERVICE_ACCOUNT_TOKEN") == "true", "worker: let lease pods mount their namespace's service account token (default off: a lease namespace's default ServiceAccount mounts none) (env DEPLOYFLOW_MOUNT_SERVICE_ACCOUNT_TOKEN)")
	fs.BoolVar(&l.Namespace.LoadBalancersWithoutNodePorts, "lease-loadbalancers-without-nodeports", os.Getenv("DEPLOYFLOW_LEASE_LOADBALANCERS_WITHOUT_NODEPORTS") == "true", "worker: a declared IP endpoint's LoadBalancer Service allocates no NodePorts (allocateLoadBalancerNodePorts: false), where the cluster's load balancer reaches pods directly; its ports then count against no NodePort quota (env DEPLOYFLOW_LEASE_LOADBALANCERS_WITHOUT_NODEPORTS)")
	fs.StringVar(&l.GPUModels, "gpu-models", os.Getenv("DEPLOYFLOW_GPU_MODELS"), "worker: comma-separated GPUs this provider offers, vendor/model or vendor/* (nvidia/a100,nvidia/h100,amd/*; nodes labelled "+manifest.GPUModelLabel+"=<model>); empty: none (env DEPLOYFLOW_GPU_MODELS)")
	fs.StringVar(&l.StorageClasses, "storage-classes", os.Getenv("DEPLOYFLOW_STORAGE_CLASSES"), "worker: comma-separated storage classes a service's persistent volume may name (each a StorageClass of the cluster); empty: no persistent volumes (env DEPLOYFLOW_STORAGE_CLASSES)")
	fs.StringVar(&l.Manifest.Storage, "max-storage", env("DEPLOYFLOW_MAX_STORAGE", manifest.DefaultMaxStorage), "worker: at most this much storage for one lease's volumes, each times its service's replicas, a quantity (env DEPLOYFLOW_MAX_STORAGE)")
	fs.StringVar(&l.AllowCapabilities, "allow-capabilities", env("DEPLOYFLOW_ALLOW_CAPABILITIES", strings.Join(manifest.DefaultAllowedCapabilities, ",")), "worker: comma-separated Linux capabilities a manifest's security section may add back to a container (all are dropped), within --pod-security's; none for none (env DEPLOYFLOW_ALLOW_CAPABILITIES)")
	p := DefaultNamespaceProfile()
	for _, k := range []struct {
		v              *string
		name, env, def string
		usage          string
	}{
		{&l.Namespace.PodSecurity, "pod-security", "DEPLOYFLOW_POD_SECURITY", p.PodSecurity, "the Pod Security Admission level lease namespaces enforce: baseline, restricted (tighter) or privileged (none)"},
		{&l.Namespace.QuotaCPU, "lease-quota-cpu", "DEPLOYFLOW_LEASE_QUOTA_CPU", p.QuotaCPU, "CPU (requests and limits) one lease namespace may take (its ResourceQuota)"},
		{&l.Namespace.QuotaMemory, "lease-quota-memory", "DEPLOYFLOW_LEASE_QUOTA_MEMORY", p.QuotaMemory, "memory (requests and limits) one lease namespace may take (its ResourceQuota)"},
		{&l.Namespace.QuotaPods, "lease-quota-pods", "DEPLOYFLOW_LEASE_QUOTA_PODS", p.QuotaPods, "pods one lease namespace may run (its ResourceQuota)"},
		{&l.Namespace.QuotaEphemeralStorage, "lease-quota-ephemeral-storage", "DEPLOYFLOW_LEASE_QUOTA_EPHEMERAL_STORAGE", p.QuotaEphemeralStorage, "node disk (limits.ephemeral-storage: logs, writable layers, emptyDir) one lease namespace may take"},
		{&l.Namespace.QuotaNodePorts, "lease-quota-nodeports", "DEPLOYFLOW_LEASE_QUOTA_NODEPORTS", p.QuotaNodePorts, "NodePorts one lease namespace may take from the cluster's range (each port of a declared IP endpoint's LoadBalancer Service takes one)"},
		{&l.Namespace.QuotaLoadBalancers, "lease-quota-loadbalancers", "DEPLOYFLOW_LEASE_QUOTA_LOADBALANCERS", p.QuotaLoadBalancers, "LoadBalancer Services one lease namespace may have (one per declared IP endpoint)"},
		{&l.Namespace.QuotaJobs, "lease-quota-jobs", "DEPLOYFLOW_LEASE_QUOTA_JOBS", p.QuotaJobs, "Jobs (analysis checks) one lease namespace may hold at once"},
		{&l.Namespace.QuotaServices, "lease-quota-services", "DEPLOYFLOW_LEASE_QUOTA_SERVICES", p.QuotaServices, "Services one lease namespace may hold (its services, blue-green previews and declared IP endpoints)"},
		{&l.Namespace.QuotaReplicaSets, "lease-quota-replicasets", "DEPLOYFLOW_LEASE_QUOTA_REPLICASETS", p.QuotaReplicaSets, "ReplicaSets one lease namespace may hold (each service's current ones and its revision history)"},
		{&l.Namespace.QuotaStorage, "lease-quota-storage", "DEPLOYFLOW_LEASE_QUOTA_STORAGE", p.QuotaStorage, "persistent storage (requests.storage) one lease namespace may claim where --storage-classes offers any (room for --max-storage; 0 where none are offered)"},
		{&l.Namespace.QuotaClaims, "lease-quota-persistentvolumeclaims", "DEPLOYFLOW_LEASE_QUOTA_PERSISTENTVOLUMECLAIMS", p.QuotaClaims, "PersistentVolumeClaims one lease namespace may hold where --storage-classes offers any (one per persistent volume and pod; 0 where none are offered)"},
		{&l.Namespace.QuotaGPUs, "lease-quota-gpus", "DEPLOYFLOW_LEASE_QUOTA_GPUS", p.QuotaGPUs, "GPUs of each vendor one lease namespace may request where --gpu-models offers any (room for --max-gpus and a rolling update's surge; 0 where none are offered)"},
		{&l.Namespace.DefaultLimitEphemeralStorage, "lease-default-limit-ephemeral-storage", "DEPLOYFLOW_LEASE_DEFAULT_LIMIT_EPHEMERAL_STORAGE", p.DefaultLimitEphemeralStorage, "a container's ephemeral-storage limit when its manifest sets none"},
		{&l.Namespace.DefaultRequestCPU, "lease-default-request-cpu", "DEPLOYFLOW_LEASE_DEFAULT_REQUEST_CPU", p.DefaultRequestCPU, "a container's CPU request when its manifest sets none (the namespace's LimitRange)"},
		{&l.Namespace.DefaultRequestMemory, "lease-default-request-memory", "DEPLOYFLOW_LEASE_DEFAULT_REQUEST_MEMORY", p.DefaultRequestMemory, "a container's memory request when its manifest sets none"},
		{&l.Namespace.DefaultLimitCPU, "lease-default-limit-cpu", "DEPLOYFLOW_LEASE_DEFAULT_LIMIT_CPU", p.DefaultLimitCPU, "a container's CPU limit when its manifest sets none"},
		{&l.Namespace.DefaultLimitMemory, "lease-default-limit-memory", "DEPLOYFLOW_LEASE_DEFAULT_LIMIT_MEMORY", p.DefaultLimitMemory, "a container's memory limit when its manifest sets none"},
		{&l.Namespace.IngressFrom, "lease-ingress-from", "DEPLOYFLOW_LEASE_INGRESS_FROM", p.IngressFrom, "comma-separated namespaces whose pods may reach a lease's pods besides its own: ingress controllers, gateways, and the worker's own where it runs in the cluster (its HTTP checks); none for none (the lease's NetworkPolicy)"},
		{&l.Namespace.EgressDeny, "lease-egress-deny", "DEPLOYFLOW_LEASE_EGRESS_DENY", p.EgressDeny, "comma-separated address ranges a lease's pods may not reach: add the cluster's pod, service and node ranges where they are public addresses; none for none"},
		{&l.Namespace.EgressAllow, "lease-egress-allow", "DEPLOYFLOW_LEASE_EGRESS_ALLOW", p.EgressAllow, "comma-separated address ranges inside --lease-egress-deny a lease's pods may reach anyway (a proxy, a shared database)"},
		{&l.Namespace.DNS, "lease-dns", "DEPLOYFLOW_LEASE_DNS", p.DNS, "the cluster DNS pods a lease's pods may ask, as namespace/label=value"},
	} {
		fs.StringVar(k.v, k.name, env(k.env, k.def), fmt.Sprintf("worker: %s (env %s)", k.usage, k.env))
	}
}

func (l LeaseLimits) validate() []error {
	var errs []error
	m := l.Manifest
	for _, k := range []struct {
		name string
		v    int64
	}{
		{"--max-services", int64(m.Services)}, {"--max-ports", int64(m.PortsPerService)}, {"--max-ip-endpoints", int64(m.IPEndpoints)},
		{"--max-hostnames", int64(m.Hostnames)}, {"--max-canary-steps", int64(m.CanarySteps)}, {"--max-replicas", int64(m.TotalReplicas)},
		{"--max-analysis-count", int64(m.MaxCount)}, {"--min-analysis-interval", int64(m.MinInterval)}, {"--max-job-seconds", m.MaxJobSeconds},
		{"--min-probe-period", int64(m.MinProbePeriod)},
	} {
		if k.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: want a positive limit", k.name))
		}
	}
	switch l.Namespace.PodSecurity {
	case "baseline", "restricted", "privileged":
	default:
		errs = append(errs, fmt.Errorf("--pod-security %q: want baseline, restricted or privileged", l.Namespace.PodSecurity))
	}
	n := l.Namespace
	for _, q := range []struct{ name, v string }{
		{"--lease-quota-cpu", n.QuotaCPU}, {"--lease-quota-memory", n.QuotaMemory}, {"--lease-quota-pods", n.QuotaPods},
		{"--lease-quota-ephemeral-storage", n.QuotaEphemeralStorage}, {"--lease-quota-nodeports", n.QuotaNodePorts},
		{"--lease-quota-loadbalancers", n.QuotaLoadBalancers}, {"--lease-quota-jobs", n.QuotaJobs},
		{"--lease-quota-services", n.QuotaServices}, {"--lease-quota-replicasets", n.QuotaReplicaSets}, {"--lease-quota-gpus", n.QuotaGPUs},
		{"--lease-quota-storage", n.QuotaStorage}, {"--lease-quota-persistentvolumeclaims", n.QuotaClaims}, {"--max-storage", m.Storage},
		{"--lease-default-limit-ephemeral-storage", n.DefaultLimitEphemeralStorage},
		{"--lease-default-request-cpu", n.DefaultRequestCPU}, {"--lease-default-request-memory", n.DefaultRequestMemory},
		{"--lease-default-limit-cpu", n.DefaultLimitCPU}, {"--lease-default-limit-memory", n.DefaultLimitMemory},
	} {
		if _, err := resource.ParseQuantity(q.v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want a Kubernetes quantity such as 2, 500m or 1Gi", q.name, q.v))
		}
	}
	// The objects a manifest within the --max-* limits makes its deploys
	// write must fit the namespace's quota, or a plan that passes fails at
	// its apply: a service and its blue-green preview, an IP endpoint's
	// LoadBalancer; a service's ReplicaSets and its revision history.
	if q, err := resource.ParseQuantity(n.QuotaServices); err == nil && m.Services > 0 {
		if need := int64(2*m.Services + m.IPEndpoints); q.Value() < need {
			errs = append(errs, fmt.Errorf("--lease-quota-services %s: a lease within --max-services %d and --max-ip-endpoints %d may need %d Services (each service and its blue-green preview, each IP endpoint's LoadBalancer): raise it, or lower those", n.QuotaServices, m.Services, m.IPEndpoints, need))
		}
	}
	if q, err := resource.ParseQuantity(n.QuotaReplicaSets); err == nil && m.Services > 0 {
		if need := int64(m.Services) * int64(manifest.MaxRevisionHistoryLimit+2); q.Value() < need {
			errs = append(errs, fmt.Errorf("--lease-quota-replicasets %s: a lease within --max-services %d may keep %d ReplicaSets (%d revisions of history and 2 current each): raise it, or lower --max-services", n.QuotaReplicaSets, m.Services, need, manifest.MaxRevisionHistoryLimit))
		}
	}
	for _, ns := range n.IngressNamespaces() {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--lease-ingress-from %q: want namespace names: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	for _, r := range []struct {
		name  string
		cidrs []string
	}{{"--lease-egress-deny", n.EgressDenied()}, {"--lease-egress-allow", n.EgressAllowed()}} {
		for _, c := range r.cidrs {
			if _, err := netip.ParsePrefix(c); err != nil {
				errs = append(errs, fmt.Errorf("%s %q: want address ranges such as 10.0.0.0/8 or fc00::/7", r.name, c))
			}
		}
	}
	if _, _, _, err := n.DNSPeer(); err != nil {
		errs = append(errs, err)
	}
	if err := l.ManifestLimits().CheckCapabilities(); err != nil {
		errs = append(errs, fmt.Errorf("--allow-capabilities: %w", err))
	}
	if l.Manifest.GPUs < 0 {
		errs = append(errs, fmt.Errorf("--max-gpus %d: want 0 or more", l.Manifest.GPUs))
	}
	if models, err := manifest.ParseGPUModels(l.GPUModels); err != nil {
		errs = append(errs, err)
	} else if q, err := resource.ParseQuantity(n.QuotaGPUs); err == nil && len(models) > 0 && q.Value() < int64(l.Manifest.GPUs) {
		errs = append(errs, fmt.Errorf("--lease-quota-gpus %s: a lease within --max-gpus %d could not run its pods: raise it (leave room for a rolling update's surge), or lower --max-gpus", n.QuotaGPUs, l.Manifest.GPUs))
	}
	for _, c := range list(l.StorageClasses) {
		if msgs := validation.IsDNS1123Subdomain(c); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--storage-classes %q: want StorageClass names: %s", c, strings.Join(msgs, "; ")))
		}
	}
	if q, err := resource.ParseQuantity(m.Storage); err == nil && q.Sign() < 0 {
		errs = append(errs, fmt.Errorf("--max-storage %s: want 0 or more", m.Storage))
	}
	if max, err := resource.ParseQuantity(m.Storage); err == nil && len(list(l.StorageClasses)) > 0 {
		if q, err := resource.ParseQuantity(n.QuotaStorage); err == nil && q.Cmp(max) < 0 {
			errs = append(errs, fmt.Errorf("--lease-quota-storage %s: a lease within --max-storage %s could not claim its volumes: raise it, or lower --max-storage", n.QuotaStorage, m.Storage))
		}
	}
	return errs
}

type int32Value int32

func (v *int32Value) String() string { return strconv.Itoa(int(*v)) }
func (v *int32Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return errors.New("want a whole number")
	}
	*v = int32Value(n)
	return nil
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

// ManifestLimits is what a lease's manifest may ask for: the --max-*
// limits, the NodePorts of its namespace's quota (--lease-quota-nodeports),
// its Pod Security level (--pod-security) and the capabilities it may add
// back (--allow-capabilities), so that a manifest needing more is refused
// before anything is written.
func (l LeaseLimits) ManifestLimits() manifest.Limits {
	m := l.Manifest
	if q, err := resource.ParseQuantity(l.Namespace.QuotaNodePorts); err == nil {
		m.NodePorts = int(q.Value())
		if m.NodePorts == 0 {
			m.NodePorts = manifest.NoNodePorts // a quota of none, not the default
		}
	}
	if l.Namespace.LoadBalancersWithoutNodePorts {
		m.NodePorts = manifest.UnboundedNodePorts // an IP endpoint's ports take none
	}
	m.PodSecurity = l.Namespace.PodSecurity
	m.GPUModels, _ = manifest.ParseGPUModels(l.GPUModels) // validated
	m.StorageClasses = list(l.StorageClasses)
	m.Capabilities = listOrNone(l.AllowCapabilities)
	if m.Capabilities == nil {
		m.Capabilities = []string{} // none: not the default
	}
	return m
}

// ManifestLimits is what a lease's manifest may ask of this worker: its
// lease limits (LeaseLimits.ManifestLimits), and secrets only where it
// encrypts what it writes into Temporal (--codec-keys-file).
func (c Config) ManifestLimits() manifest.Limits {
	m := c.LeaseLimits.ManifestLimits()
	m.Secrets = c.CodecKeysFile != ""
	return m
}

// ReservedPrefixes is ReservedKeyPrefixes as a list.
func (l LeaseLimits) ReservedPrefixes() []string { return list(l.ReservedKeyPrefixes) }

// AllowedPodKeys is AllowPodKeys as a list.
func (l LeaseLimits) AllowedPodKeys() []string { return list(l.AllowPodKeys) }
