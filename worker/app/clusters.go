package app

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/fx"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/metrics"
	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/internal/reserve"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/k8s/kube"
)

// Cluster is one of the clusters the worker deploys to besides its own
// (--clusters, issue 23.1): its clients, its activities (acting on it
// only) and its Temporal worker, on task queue <task queue>@<name>.
type Cluster struct {
	config.ClusterRef
	REST       *rest.Config
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
	Activities *activities.Activities
	Worker     worker.Worker
}

// Clusters are the worker's other clusters, in --clusters order.
type Clusters []*Cluster

// NewClusters connects the clusters of --clusters: a kubeconfig context
// each, the activities of base on it (the lease records stay the worker's
// own cluster's), a Temporal worker on its task queue.
func NewClusters(cfg config.Config, c client.Client, base *activities.Activities, m *metrics.Metrics) (Clusters, error) {
	refs, err := cfg.Refs()
	if err != nil {
		return nil, err
	}
	pool, err := cfg.Pool()
	if err != nil {
		return nil, err
	}
	var out Clusters
	for _, ref := range refs {
		kubeconfig := cfg.Kubeconfig
		if ref.Kubeconfig != "" {
			kubeconfig = ref.Kubeconfig
		}
		rc, err := kube.RESTConfig(kubeconfig, ref.Context, "deployflow-worker")
		if err != nil {
			return nil, fmt.Errorf("--clusters: cluster %s (context %q): %w", ref.Name, ref.Context, err)
		}
		rc.QPS, rc.Burst = float32(cfg.KubeAPIQPS), cfg.KubeAPIBurst
		rc.Wrap(m.WrapTransport)
		cl, err := ClusterOn(ref, rc, base, pool.String(), cfg.Blocked())
		if err != nil {
			return nil, err
		}

		cl.Worker = worker.New(c, config.ClusterTaskQueue(cfg.TaskQueue, ref.Name), workerOptions(cfg, m))
		Register(cl.Worker, cl.Activities)
		out = append(out, cl)
	}
	return out, nil
}

// ClusterOn builds cluster ref reached through rc, with base's activities
// acting on it; tests use it with their own clusters.
func ClusterOn(ref config.ClusterRef, rc *rest.Config, base *activities.Activities, pool string, blocked []string) (*Cluster, error) {
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", ref.Name, err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", ref.Name, err)
	}
	p, err := config.Config{IPPool: pool}.Pool()
	if err != nil {
		return nil, err
	}
	hostnames := reserve.NewHostnames(dyn, blocked)
	if base.Hostnames != nil && base.Hostnames.IsShared() {
		hostnames = base.Hostnames.SharedWith(ref.Name) // --global-hostnames
	}
	ips := reserve.NewIPs(dyn, p)
	if base.IPs != nil && base.IPs.IsShared() {
		ips = base.IPs.SharedWith(ref.Name) // --global-ips: the worker's own cluster's pool and store
	}
	acts := activities.OnCluster(base, kc, dyn, hostnames, ips)
	if ref.Routing == config.RoutingIngress {
		acts.Gateway = nil // --cluster-routing NAME=ingress: its leases' Ingresses
	}
	return &Cluster{ClusterRef: ref, REST: rc, Kube: kc, Dynamic: dyn, Activities: acts}, nil
}

// CheckClusters checks at start that each cluster serves deployflow's
// CRDs (or installs them, --install-crds) and, with --routing gateway,
// has the Gateway (CheckGateway). A cluster that lacks them stops the
// worker, named with the fix; one that does not answer is reported and
// waited for: its deploys wait until it answers (issue 23.5), and the
// other clusters' are not held up by it.
func CheckClusters(cfg config.Config, cls Clusters, log *slog.Logger) error {
	if len(cls) == 0 {
		return nil
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := checkCluster(cfg, cl, log)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				log.Info("cluster ready", "cluster", cl.Name, "context", cl.Context, "server", cl.REST.Host)
			case errors.Is(err, errUnreachable):
				log.Warn("cluster unreachable at start: its deploys wait until it answers", "cluster", cl.Name, "context", cl.Context, "server", cl.REST.Host, "error", err)
			default:
				errs = append(errs, fmt.Errorf("cluster %s (context %s, %s): %w", cl.Name, cl.Context, cl.REST.Host, err))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

var errUnreachable = errors.New("unreachable")

// checkCluster asks the cluster's API server whether it is ready (10s: a
// cluster that does not answer is unreachable, and its deploys wait), then
// installs or checks the CRDs and the Gateway. Those steps have bounds of
// their own, not what is left of the readiness check's: an API server that
// has just started, on a loaded machine, takes more than 10s to serve new
// CRDs (crds.Install waits up to 2 minutes for that; CI run 89 failed when
// the 10s were shared).
func checkCluster(cfg config.Config, cl *Cluster, log *slog.Logger) error {
	ready, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ready); err != nil && !strings.Contains(err.Error(), "forbidden") {
		return fmt.Errorf("%w: %v", errUnreachable, err)
	}
	if cfg.InstallCRDs {
		// The apply and the wait until served (crds' own 2 minutes) in 3.
		ictx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := crds.Install(ictx, cl.Dynamic); err != nil {
			return err
		}
	} else if err := crds.Check(cl.Kube.Discovery()); err != nil {
		return err
	}
	if gw := cl.Activities.Gateway; gw != nil {
		gctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return gatewayChecked(CheckGateway(gctx, gw.Dynamic, gw.Ref), log, cl.Name)
	}
	return nil
}

// StartClusters checks the clusters, then starts their Temporal workers
// on fx start and stops them on fx stop.
func StartClusters(lc fx.Lifecycle, cfg config.Config, cls Clusters, log *slog.Logger) {
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			if err := CheckClusters(cfg, cls, log); err != nil {
				return err
			}
			for _, cl := range cls {
				if err := cl.Worker.Start(); err != nil {
					return fmt.Errorf("cluster %s: %w", cl.Name, err)
				}
				log.Info("cluster worker started", "cluster", cl.Name, "taskQueue", config.ClusterTaskQueue(cfg.TaskQueue, cl.Name))
			}
			return nil
		},
		OnStop: func(context.Context) error {
			for _, cl := range cls {
				cl.Worker.Stop()
			}
			return nil
		},
	})
}

// StartClusterObservers runs one observer per cluster (--observe): it
// watches the cluster's ReplicaSets and the worker's own lease records,
// tells the lease workflows of that cluster what changed, and is the cache
// their rollout waits and safety-net ticks read. The workers sharing a
// task queue share each cluster's leases, as they do their own cluster's.
// Each observer's series carry its cluster's name (cluster="eu-1"), the
// worker's own observer's too (--cluster-name).
func StartClusterObservers(lc fx.Lifecycle, cfg config.Config, cls Clusters, home *rest.Config, c client.Client, reg *prometheus.Registry, log *slog.Logger) error {
	if !cfg.Observe {
		return nil
	}
	ns := cfg.ObserverNamespace
	if ns == "" {
		ns = kube.Namespace(cfg.Kubeconfig, cfg.KubeContext)
	}
	homeKube, err := kubernetes.NewForConfig(home)
	if err != nil {
		return err
	}
	for _, cl := range cls {
		clog := log.With("cluster", cl.Name)
		members := observe.NewMembers(homeKube, observe.MembersOptions{Namespace: ns, Group: cfg.Group() + "@" + cl.Name, Identity: cfg.ObserverIdentity, TTL: cfg.ObserverTTL, Log: clog})
		o, err := observe.New(cl.REST, TemporalSender{Client: c, Cluster: cl.Name}, observe.Options{UnknownAfter: cfg.UnknownAfter, Workers: cfg.ObserverSenders, Members: members, Leases: home, Log: clog})
		if err != nil {
			return fmt.Errorf("cluster %s: %w", cl.Name, err)
		}
		observerRegisterer(reg, cfg, cl.Name).MustRegister(o.Collectors()...)
		cl.Activities.Observer = o
		runUntilStop(lc, o.Run)
	}
	return nil
}

// observerRegisterer is where the observer of cluster registers its
// series: with --clusters, labelled with the cluster's name (one observer
// per cluster, one registry); without, unlabelled, as a single-cluster
// worker always exported them.
func observerRegisterer(reg *prometheus.Registry, cfg config.Config, cluster string) prometheus.Registerer {
	if strings.TrimSpace(cfg.ClustersList) == "" {
		return reg
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{"cluster": cluster}, reg)
}

// runUntilStop runs run from fx start until fx stop.
func runUntilStop(lc fx.Lifecycle, run func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			go func() { defer close(done); run(ctx) }()
			return nil
		},
		OnStop: func(context.Context) error {
			cancel()
			<-done
			return nil
		},
	})
}
