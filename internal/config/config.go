// Package config holds the settings the worker and the CLI share. Each has a
// flag and an environment variable; the flag wins.
package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/deployflow/deployflow/internal/version"
)

// Defaults, matching the local dev stack (make dev-up).
const (
	DefaultTemporalAddress = "127.0.0.1:7233"
	DefaultNamespace       = "default"
	DefaultTaskQueue       = "deployflow"
	DefaultMetricsAddress  = "127.0.0.1:9464"
)

// Config is what the worker and the CLI need to reach Temporal and Kubernetes.
type Config struct {
	// Temporal: see temporal.go. After Resolve, TemporalAddress and
	// TemporalNamespace hold what the client dials.
	Temporal
	TaskQueue string // DEPLOYFLOW_TASK_QUEUE
	// Kubeconfig is --kubeconfig: one file, read instead of kubectl's
	// loading rules ($KUBECONFIG, ~/.kube/config, in-cluster); see
	// k8s/kube.RESTConfig.
	Kubeconfig string
	// KubeContext is --context: the kubeconfig context to use instead of
	// the current one.
	KubeContext      string
	MetricsAddress   string // DEPLOYFLOW_METRICS_ADDRESS (worker only)
	LogLevel         string // DEPLOYFLOW_LOG_LEVEL: debug, info, warn, error
	LogFormat        string // DEPLOYFLOW_LOG_FORMAT: text or json
	IPPool           string // DEPLOYFLOW_IP_POOL: CIDR declared IPs are allocated from
	BlockedHostnames string // DEPLOYFLOW_BLOCKED_HOSTNAMES: comma-separated names and .suffixes
	// RolloutNamespacesList is DEPLOYFLOW_ROLLOUT_NAMESPACES: namespaces
	// besides the lease namespaces where standalone rollouts may act.
	RolloutNamespacesList string
	// RegisterSearchAttributes: DEPLOYFLOW_REGISTER_SEARCH_ATTRIBUTES=true
	// registers missing search attributes at start (worker only).
	RegisterSearchAttributes bool
	// DeploymentName (DEPLOYFLOW_DEPLOYMENT_NAME) turns on Temporal Worker
	// Versioning: the worker belongs to this Worker Deployment, as version
	// BuildID (DEPLOYFLOW_BUILD_ID, by default the binary's build ID).
	DeploymentName string
	BuildID        string
	// Tuning is the worker's Temporal concurrency (tuning.go).
	Tuning
	// InstallCRDs (DEPLOYFLOW_INSTALL_CRDS=true): the worker installs the
	// CRDs at start, for the dev stack; otherwise it only checks that the
	// cluster serves them (a cluster installs them with the Helm chart).
	InstallCRDs bool
	// Observe (DEPLOYFLOW_OBSERVE, default true): the worker watches lease
	// records and deployflow's ReplicaSets with shared informers and tells
	// idle lease workflows what changed (internal/observe). Off, idle leases
	// learn of changes only from their safety-net timer.
	Observe bool
	// Profiling (DEPLOYFLOW_PROFILING=true): the metrics address also
	// serves Go's profiles under /debug/pprof/ (heap, goroutines, CPU),
	// for measuring a worker's memory; off by default, as they show the
	// process's internals to whoever reaches that address.
	Profiling bool
	// UnknownAfter (DEPLOYFLOW_UNKNOWN_AFTER): the observer's watches
	// failing this long make every lease Unknown (never Degraded).
	UnknownAfter time.Duration
	// ObserverSharing: how several workers split the observers' work
	// (observer.go).
	ObserverSharing
	// PrometheusURL (DEPLOYFLOW_PROMETHEUS_URL): the Prometheus canary
	// analyses query; empty: analyses are inconclusive (a human decides).
	PrometheusURL string
	// PrometheusLabel (DEPLOYFLOW_PROMETHEUS_NAMESPACE_LABEL): the label
	// that carries a series' namespace; every analysis query is confined
	// to the lease's.
	PrometheusLabel string
	// NotifyURL (DEPLOYFLOW_NOTIFY_URL): a webhook that receives canary
	// events as JSON POSTs; empty: none.
	NotifyURL string
	// HTTPCheckAllow (DEPLOYFLOW_HTTP_CHECK_ALLOW): the hosts an analysis's
	// HTTP check may GET besides the lease's own Services (host names,
	// *.suffix, or CIDRs); a lease owner must not make the worker probe
	// anything else.
	HTTPCheckAllow string
	// ClusterDomain (DEPLOYFLOW_CLUSTER_DOMAIN): the cluster's DNS domain,
	// so <svc>.<ns>.svc.<domain> names a lease's own Service.
	ClusterDomain string
	// LeaseLimits are the operator's bounds on one lease (limits.go).
	LeaseLimits
	// Routing is where a lease's hostnames go (routing.go).
	Routing
	// Clusters the worker deploys to besides its own (clusters.go).
	Clusters
}

// HTTPCheckHosts splits HTTPCheckAllow.
func (c Config) HTTPCheckHosts() []string { return list(c.HTTPCheckAllow) }

// DefaultIPPool is the range declared IPs come from unless configured.
const DefaultIPPool = "10.200.0.0/24"

// RegisterFlags binds c to fs, with defaults taken from the environment.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Temporal.RegisterFlags(fs)
	fs.StringVar(&c.TaskQueue, "task-queue", env("DEPLOYFLOW_TASK_QUEUE", DefaultTaskQueue), "Temporal task queue of the deployflow worker (env DEPLOYFLOW_TASK_QUEUE)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "path to a kubeconfig file; by default kubectl's rules: $KUBECONFIG (a list), ~/.kube/config, else the in-cluster service account")
	fs.StringVar(&c.KubeContext, "context", "", "the kubeconfig context to use (default: its current context)")
	fs.StringVar(&c.MetricsAddress, "metrics-address", env("DEPLOYFLOW_METRICS_ADDRESS", DefaultMetricsAddress), "address serving /metrics, /healthz and /readyz (env DEPLOYFLOW_METRICS_ADDRESS)")
	fs.StringVar(&c.LogLevel, "log-level", env("DEPLOYFLOW_LOG_LEVEL", "info"), "log level: debug, info, warn or error (env DEPLOYFLOW_LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", env("DEPLOYFLOW_LOG_FORMAT", "text"), "log format: text or json (env DEPLOYFLOW_LOG_FORMAT)")
	fs.StringVar(&c.IPPool, "ip-pool", env("DEPLOYFLOW_IP_POOL", DefaultIPPool), "CIDR the declared IPs of leases are allocated from (env DEPLOYFLOW_IP_POOL)")
	fs.StringVar(&c.RolloutNamespacesList, "rollout-namespaces", os.Getenv("DEPLOYFLOW_ROLLOUT_NAMESPACES"), "comma-separated namespaces, besides the lease namespaces deployflow manages, where standalone rollouts may act; default none (env DEPLOYFLOW_ROLLOUT_NAMESPACES)")
	fs.BoolVar(&c.RegisterSearchAttributes, "register-search-attributes", os.Getenv("DEPLOYFLOW_REGISTER_SEARCH_ATTRIBUTES") == "true", "worker: register deployflow's missing search attributes in the Temporal namespace at start instead of refusing to start (env DEPLOYFLOW_REGISTER_SEARCH_ATTRIBUTES=true)")
	fs.StringVar(&c.DeploymentName, "deployment-name", os.Getenv("DEPLOYFLOW_DEPLOYMENT_NAME"), "worker: the Temporal Worker Deployment this worker belongs to; set, it turns on Worker Versioning (rollouts pinned to the build that started them, lease workflows auto-upgrading); empty: unversioned (env DEPLOYFLOW_DEPLOYMENT_NAME)")
	fs.StringVar(&c.BuildID, "build-id", env("DEPLOYFLOW_BUILD_ID", version.Get().BuildID), "worker: this build's ID in its Worker Deployment (env DEPLOYFLOW_BUILD_ID; default: the binary's build ID)")
	c.Tuning.RegisterFlags(fs)
	c.LeaseLimits.RegisterFlags(fs)
	c.ObserverSharing.RegisterFlags(fs)
	c.Clusters.RegisterFlags(fs)
	c.Routing.RegisterFlags(fs)
	fs.BoolVar(&c.InstallCRDs, "install-crds", os.Getenv("DEPLOYFLOW_INSTALL_CRDS") == "true", "worker: install (update) deployflow's CRDs at start; needs CRD write access, for the dev stack only: in a cluster the Helm chart installs them (env DEPLOYFLOW_INSTALL_CRDS=true)")
	fs.BoolVar(&c.Observe, "observe", os.Getenv("DEPLOYFLOW_OBSERVE") != "false", "worker: watch leases and their ReplicaSets (shared informers) and tell idle lease workflows what changed; false: they learn it only from their safety-net timer (env DEPLOYFLOW_OBSERVE)")
	fs.BoolVar(&c.Profiling, "profiling", os.Getenv("DEPLOYFLOW_PROFILING") == "true", "worker: also serve Go's profiles (/debug/pprof/) on --metrics-address; off by default: anyone reaching that address could read the process's internals (env DEPLOYFLOW_PROFILING=true)")
	unknownAfter, err := time.ParseDuration(env("DEPLOYFLOW_UNKNOWN_AFTER", "15s"))
	if err != nil {
		unknownAfter = -1 // reported by Validate
	}
	fs.DurationVar(&c.UnknownAfter, "unknown-after", unknownAfter, "worker: how long the observer's watches may fail before every lease is Unknown (env DEPLOYFLOW_UNKNOWN_AFTER)")
	fs.StringVar(&c.PrometheusURL, "prometheus-url", os.Getenv("DEPLOYFLOW_PROMETHEUS_URL"), "worker: the Prometheus canary analyses query, e.g. http://prometheus:9090 (env DEPLOYFLOW_PROMETHEUS_URL)")
	fs.StringVar(&c.PrometheusLabel, "prometheus-namespace-label", env("DEPLOYFLOW_PROMETHEUS_NAMESPACE_LABEL", "namespace"), "worker: the label carrying a series' Kubernetes namespace; every analysis query reads only the series of its lease's namespace (env DEPLOYFLOW_PROMETHEUS_NAMESPACE_LABEL)")
	fs.StringVar(&c.NotifyURL, "notify-url", os.Getenv("DEPLOYFLOW_NOTIFY_URL"), "worker: a webhook receiving canary events (step completed, paused, promoted, aborted, failed) as JSON POSTs (env DEPLOYFLOW_NOTIFY_URL)")
	fs.StringVar(&c.HTTPCheckAllow, "http-check-allow", os.Getenv("DEPLOYFLOW_HTTP_CHECK_ALLOW"), "worker: comma-separated hosts (names, *.suffix, CIDRs) analyses' HTTP checks may GET besides the lease's own Services, e.g. *.monitoring.svc.cluster.local (env DEPLOYFLOW_HTTP_CHECK_ALLOW)")
	fs.StringVar(&c.ClusterDomain, "cluster-domain", env("DEPLOYFLOW_CLUSTER_DOMAIN", "cluster.local"), "worker: the cluster's DNS domain; an HTTP check of <service>.<lease namespace>.svc.<domain> reaches the lease's own Service (env DEPLOYFLOW_CLUSTER_DOMAIN)")
	fs.StringVar(&c.BlockedHostnames, "blocked-hostnames", os.Getenv("DEPLOYFLOW_BLOCKED_HOSTNAMES"), "comma-separated hostnames (exact, or .suffix) no lease may reserve (env DEPLOYFLOW_BLOCKED_HOSTNAMES)")
}

// Pool parses IPPool.
func (c Config) Pool() (netip.Prefix, error) {
	p, err := netip.ParsePrefix(c.IPPool)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("--ip-pool %q: want a CIDR such as %s", c.IPPool, DefaultIPPool)
	}
	return p.Masked(), nil
}

// Blocked is BlockedHostnames as a list.
func (c Config) Blocked() []string { return list(c.BlockedHostnames) }

// RolloutNamespaces is RolloutNamespacesList as a list.
func (c Config) RolloutNamespaces() []string { return list(c.RolloutNamespacesList) }

func list(s string) []string {
	var out []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// FromEnv is the configuration the environment (and the Temporal
// profile it selects) alone gives, resolved; tests use it.
func FromEnv() Config {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("env", flag.ContinueOnError))
	_ = c.Resolve()
	return c
}

// Resolve loads what flags left unset from the environment and the
// Temporal client profile (see Temporal.Resolve). Call it after parsing the
// flags and before Validate.
func (c *Config) Resolve() error { return c.Temporal.Resolve() }

// Validate names the first bad setting and how to fix it.
func (c Config) Validate() error {
	errs := c.Temporal.validate()
	if c.TaskQueue == "" {
		errs = append(errs, errors.New("--task-queue is empty: set it or DEPLOYFLOW_TASK_QUEUE (e.g. deployflow)"))
	}
	if strings.Contains(c.TaskQueue, "@") {
		errs = append(errs, fmt.Errorf("--task-queue %q: '@' separates a task queue from its cluster's (<queue>@<cluster>, --clusters): use a name without it", c.TaskQueue))
	}
	if _, err := c.SlogLevel(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Pool(); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range c.RolloutNamespaces() {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--rollout-namespaces: %q is not a namespace name (%s)", ns, msgs[0]))
		}
	}
	if c.DeploymentName != "" && c.BuildID == "" {
		errs = append(errs, errors.New("--build-id is empty: Worker Versioning (--deployment-name) needs this build's ID"))
	}
	if c.UnknownAfter <= 0 {
		errs = append(errs, errors.New("--unknown-after: want a positive duration such as 15s (env DEPLOYFLOW_UNKNOWN_AFTER)"))
	}
	for _, u := range []struct{ flag, env, value, example string }{
		{"--prometheus-url", "DEPLOYFLOW_PROMETHEUS_URL", c.PrometheusURL, "http://prometheus:9090"},
		{"--notify-url", "DEPLOYFLOW_NOTIFY_URL", c.NotifyURL, "https://hooks.example.com/deployflow"},
	} {
		if p, err := url.Parse(u.value); u.value != "" && (err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "") {
			errs = append(errs, fmt.Errorf("%s %q: want an http(s) URL such as %s (env %s)", u.flag, u.value, u.example, u.env))
		}
	}
	errs = append(errs, c.Tuning.validate()...)
	errs = append(errs, c.LeaseLimits.validate()...)
	errs = append(errs, c.ObserverSharing.validate()...)
	errs = append(errs, c.Clusters.validate()...)
	errs = append(errs, c.Routing.validate()...)
	if refs, err := c.Clusters.Refs(); err == nil && c.Routing.RoutingMode != RoutingGateway {
		for _, ref := range refs {
			if ref.Routing == RoutingGateway {
				errs = append(errs, fmt.Errorf("--cluster-routing: cluster %s routes through a Gateway only where the worker does: add --routing gateway --gateway NAMESPACE/NAME (the Gateway of that name in each cluster), or route %s through its Ingress", ref.Name, ref.Name))
			}
		}
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", c.LogFormat))
	}
	return errors.Join(errs...)
}

// SlogLevel parses LogLevel.
func (c Config) SlogLevel() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	return l, nil
}

func env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}
