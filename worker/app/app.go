// Package app wires deployflow's worker with fx: configuration, logging, the
// Temporal and Kubernetes clients, one Prometheus registry served with health
// endpoints, and the Temporal worker itself.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/internal/metrics"
	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/internal/reserve"
	"github.com/deployflow/deployflow/k8s/kube"
)

// Module is the whole worker application; cfg comes from flags and env.
func Module(cfg config.Config) fx.Option {
	return fx.Options(
		fx.Supply(cfg),
		fx.Provide(
			NewLogger,
			NewRegistry,
			NewMetricsHandler,
			NewTemporalClient,
			NewKubeConfig,
			NewKubeClient,
			NewDynamicClient,
			NewDeployflowMetrics,
			NewActivities,
			NewWorker,
			NewClusters,
			NewHealth,
		),
		fx.WithLogger(func(log *slog.Logger) fxevent.Logger {
			l := &fxevent.SlogLogger{Logger: log}
			l.UseLogLevel(slog.LevelDebug)
			return l
		}),
		fx.Invoke(InstallCRDs, StartGatewayCheck, CheckSearchAttributes, RegisterLeasesCollector, StartObserver, StartClusterObservers, StartClusters, StartWorker, ServeHTTP),
	)
}

// NewLogger is the process logger (stderr, text or JSON).
func NewLogger(cfg config.Config) (*slog.Logger, error) {
	level, err := cfg.SlogLevel()
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	return slog.New(h), nil
}

// NewTemporalClient dials the Temporal frontend, with SDK metrics exported
// through mh. It fails fast (with the address) if Temporal is unreachable.
func NewTemporalClient(lc fx.Lifecycle, cfg config.Config, log *slog.Logger, mh client.MetricsHandler) (client.Client, error) {
	opts, err := cfg.ClientOptions()
	if err != nil {
		return nil, err
	}
	opts.Logger = sdklog.NewStructuredLogger(log.With("component", "temporal-sdk"))
	opts.MetricsHandler = mh
	c, err := client.DialContext(context.Background(), opts)
	if err != nil {
		if hint := cfg.DialHint(err); hint != "" {
			return nil, fmt.Errorf("temporal at %s: %s: %w", cfg.TemporalAddress, hint, err)
		}
		return nil, fmt.Errorf("temporal at %s: %w", cfg.TemporalAddress, err)
	}
	lc.Append(fx.StopHook(c.Close))
	return c, nil
}

// NewKubeConfig is the worker's Kubernetes client configuration; every
// request it makes is counted in deployflow_kube_requests_total.
func NewKubeConfig(cfg config.Config, m *metrics.Metrics) (*rest.Config, error) {
	rc, err := kube.RESTConfig(cfg.Kubeconfig, cfg.KubeContext, "deployflow-worker")
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = float32(cfg.KubeAPIQPS), cfg.KubeAPIBurst
	rc.Wrap(m.WrapTransport)
	return rc, nil
}

// NewKubeClient builds the Kubernetes client the activities use.
func NewKubeClient(rc *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(rc) }

// NewDynamicClient serves deployflow's own resources (leases, reservations).
func NewDynamicClient(rc *rest.Config) (dynamic.Interface, error) { return dynamic.NewForConfig(rc) }

// NewDeployflowMetrics registers deployflow's metrics in the one registry.
func NewDeployflowMetrics(reg *prometheus.Registry) *metrics.Metrics { return metrics.New(reg) }

// NewActivities is the activities' dependencies: clients, the lease store,
// hostname and IP reservations, metrics.
func NewActivities(cfg config.Config, kc kubernetes.Interface, dyn dynamic.Interface, m *metrics.Metrics) (*activities.Activities, error) {
	pool, err := cfg.Pool()
	if err != nil {
		return nil, err
	}
	acts := Activities(kc, dyn, pool, cfg.Blocked(), m)
	if cfg.GlobalHostnames {
		// One store for every cluster (--clusters), this cluster's: each
		// cluster's activities reserve through their view of it.
		acts.Hostnames = acts.Hostnames.Shared(cfg.ClusterName, cfg.ClusterName)
	}
	if cfg.GlobalIPs {
		// Likewise one pool and store of IPs (--global-ips).
		acts.IPs = acts.IPs.Shared(cfg.ClusterName, cfg.ClusterName)
	}
	acts.RolloutNamespaces = cfg.RolloutNamespaces()
	acts.HTTPCheckAllow = cfg.HTTPCheckHosts()
	acts.ClusterDomain = cfg.ClusterDomain
	acts.PrometheusLabel = cfg.PrometheusLabel
	acts.Limits = cfg.ManifestLimits()
	acts.ReservedPrefixes = cfg.LeaseLimits.ReservedPrefixes()
	acts.AllowedPodKeys = cfg.LeaseLimits.AllowedPodKeys()
	acts.Namespace = cfg.LeaseLimits.Namespace
	if gw := cfg.Routing.Gateway(); gw != nil {
		acts.Gateway = &activities.GatewayRouting{Ref: *gw, Dynamic: dyn}
	}
	acts.MountServiceAccountToken = cfg.LeaseLimits.MountServiceAccountToken
	if cfg.NotifyURL != "" {
		acts.Notifier = &activities.Notifier{URL: cfg.NotifyURL, Client: &http.Client{Timeout: 10 * time.Second}}
	}
	if cfg.PrometheusURL != "" {
		if acts.Prometheus, err = PrometheusAPI(cfg.PrometheusURL); err != nil {
			return nil, err
		}
	}
	return acts, nil
}

// Activities wires the activities; tests use it with their own clients.
func Activities(kc kubernetes.Interface, dyn dynamic.Interface, pool netip.Prefix, blocked []string, m *metrics.Metrics) *activities.Activities {
	return &activities.Activities{
		Kube:      kc,
		Leases:    lease.NewKubeStore(dyn),
		Hostnames: reserve.NewHostnames(dyn, blocked),
		IPs:       reserve.NewIPs(dyn, pool),
		Metrics:   m,
	}
}

// PrometheusAPI is the client of the Prometheus at address.
func PrometheusAPI(address string) (activities.PrometheusAPI, error) {
	c, err := promapi.NewClient(promapi.Config{Address: address})
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url %q: %w", address, err)
	}
	return promv1.NewAPI(c), nil
}

// StartObserver runs the worker's observer (--observe): shared informers on
// lease records and deployflow's ReplicaSets that tell idle lease workflows
// what changed, and that the safety-net ticks read instead of the API
// server.
func StartObserver(lc fx.Lifecycle, cfg config.Config, rc *rest.Config, c client.Client, acts *activities.Activities, reg *prometheus.Registry, log *slog.Logger) error {
	if !cfg.Observe {
		log.Info("observer off (--observe=false): idle leases learn of changes from their safety-net timer only")
		return nil
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ns := cfg.ObserverNamespace
	if ns == "" {
		ns = kube.Namespace(cfg.Kubeconfig, cfg.KubeContext)
	}
	members := observe.NewMembers(kc, observe.MembersOptions{Namespace: ns, Group: cfg.Group(), Identity: cfg.ObserverIdentity, TTL: cfg.ObserverTTL, Log: log})
	o, err := observe.New(rc, TemporalSender{Client: c}, observe.Options{UnknownAfter: cfg.UnknownAfter, Workers: cfg.ObserverSenders, Members: members, Log: log})
	if err != nil {
		return err
	}
	observerRegisterer(reg, cfg, cfg.ClusterName).MustRegister(o.Collectors()...)
	acts.Observer = o
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			go func() { defer close(done); o.Run(ctx) }()
			return nil
		},
		OnStop: func(context.Context) error {
			cancel()
			<-done
			return nil
		},
	})
	return nil
}
