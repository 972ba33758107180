package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

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
	// DefaultRequestCPU/Memory and DefaultLimitCPU/Memory are the
	// LimitRange's per-container defaults (a pod that sets none gets them,
	// so the quota can count it).
	DefaultRequestCPU    string `json:"defaultRequestCPU"`
	DefaultRequestMemory string `json:"defaultRequestMemory"`
	DefaultLimitCPU      string `json:"defaultLimitCPU"`
	DefaultLimitMemory   string `json:"defaultLimitMemory"`
}

// DefaultNamespaceProfile is a lease namespace's profile unless the
// operator sets another.
func DefaultNamespaceProfile() NamespaceProfile {
	return NamespaceProfile{
		PodSecurity: "baseline", QuotaCPU: "16", QuotaMemory: "32Gi", QuotaPods: "200",
		DefaultRequestCPU: "100m", DefaultRequestMemory: "128Mi", DefaultLimitCPU: "1", DefaultLimitMemory: "512Mi",
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

	fs.StringVar(&l.ReservedKeyPrefixes, "reserved-key-prefixes", env("DEPLOYFLOW_RESERVED_KEY_PREFIXES", strings.Join(manifest.DefaultReservedPrefixes, ",")), "worker: comma-separated label/annotation prefixes (and their subdomains) a tenant's pods and analysis Jobs may not use (env DEPLOYFLOW_RESERVED_KEY_PREFIXES)")
	fs.StringVar(&l.AllowPodKeys, "allow-pod-keys", os.Getenv("DEPLOYFLOW_ALLOW_POD_KEYS"), "worker: comma-separated reserved keys a tenant may use anyway, e.g. the local stack's kwok knobs deployflow.dev/ready-after (env DEPLOYFLOW_ALLOW_POD_KEYS)")
	fs.BoolVar(&l.MountServiceAccountToken, "mount-service-account-token", os.Getenv("DEPLOYFLOW_MOUNT_SERVICE_ACCOUNT_TOKEN") == "true", "worker: let lease pods mount their namespace's service account token (default off: a lease namespace's default ServiceAccount mounts none) (env DEPLOYFLOW_MOUNT_SERVICE_ACCOUNT_TOKEN)")
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
		{&l.Namespace.DefaultRequestCPU, "lease-default-request-cpu", "DEPLOYFLOW_LEASE_DEFAULT_REQUEST_CPU", p.DefaultRequestCPU, "a container's CPU request when its manifest sets none (the namespace's LimitRange)"},
		{&l.Namespace.DefaultRequestMemory, "lease-default-request-memory", "DEPLOYFLOW_LEASE_DEFAULT_REQUEST_MEMORY", p.DefaultRequestMemory, "a container's memory request when its manifest sets none"},
		{&l.Namespace.DefaultLimitCPU, "lease-default-limit-cpu", "DEPLOYFLOW_LEASE_DEFAULT_LIMIT_CPU", p.DefaultLimitCPU, "a container's CPU limit when its manifest sets none"},
		{&l.Namespace.DefaultLimitMemory, "lease-default-limit-memory", "DEPLOYFLOW_LEASE_DEFAULT_LIMIT_MEMORY", p.DefaultLimitMemory, "a container's memory limit when its manifest sets none"},
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
		{"--lease-default-request-cpu", n.DefaultRequestCPU}, {"--lease-default-request-memory", n.DefaultRequestMemory},
		{"--lease-default-limit-cpu", n.DefaultLimitCPU}, {"--lease-default-limit-memory", n.DefaultLimitMemory},
	} {
		if _, err := resource.ParseQuantity(q.v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want a Kubernetes quantity such as 2, 500m or 1Gi", q.name, q.v))
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

// ReservedPrefixes is ReservedKeyPrefixes as a list.
func (l LeaseLimits) ReservedPrefixes() []string { return list(l.ReservedKeyPrefixes) }

// AllowedPodKeys is AllowPodKeys as a list.
func (l LeaseLimits) AllowedPodKeys() []string { return list(l.AllowPodKeys) }
