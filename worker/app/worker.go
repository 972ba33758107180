package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/fx"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/activities/fleet"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/metrics"
	"github.com/deployflow/deployflow/internal/searchattr"
	"github.com/deployflow/deployflow/internal/version"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/workflows"
)

// Register puts deployflow's workflows and activities on a worker. The
// worker binary and the integration tests' in-process workers share it.
// Each workflow runs under its name in the contract, with its versioning
// behaviour (workflows.Register).
func Register(w worker.Registry, acts *activities.Activities) {
	workflows.Register(w)
	w.RegisterActivity(acts)
}

// NewWorker builds the Temporal worker polling cfg.TaskQueue.
func NewWorker(cfg config.Config, c client.Client, acts *activities.Activities, m *metrics.Metrics) worker.Worker {
	w := worker.New(c, cfg.TaskQueue, workerOptions(cfg, m))
	Register(w, acts)
	Fleet(cfg, c).Register(w)
	return w
}

// Fleet is the placement workflow's activities of a worker configured by
// cfg: its own cluster and its --clusters.
func Fleet(cfg config.Config, c client.Client) *fleet.Activities {
	refs, _ := cfg.Refs() // validated
	f := &fleet.Activities{Temporal: c, TaskQueue: cfg.TaskQueue, Self: cfg.ClusterName, Limits: cfg.ManifestLimits(),
		ReservedPrefixes: cfg.LeaseLimits.ReservedPrefixes(), AllowedPodKeys: cfg.LeaseLimits.AllowedPodKeys()}
	for _, r := range refs {
		f.Clusters = append(f.Clusters, r.Name)
	}
	return f
}

// workerOptions are the options of the worker's Temporal workers: the one
// on its task queue and one per cluster of --clusters.
func workerOptions(cfg config.Config, m *metrics.Metrics) worker.Options {
	opts := worker.Options{
		// Activities get this long to finish on SIGTERM; the heartbeating
		// waits return promptly and are retried by the next worker.
		WorkerStopTimeout: 5 * time.Second,
		Interceptors:      []interceptor.WorkerInterceptor{m.Interceptor()},

		MaxConcurrentActivityExecutionSize:      cfg.MaxConcurrentActivities,
		MaxConcurrentLocalActivityExecutionSize: cfg.MaxConcurrentLocalActivities,
		MaxConcurrentWorkflowTaskExecutionSize:  cfg.MaxConcurrentWorkflowTasks,
		MaxConcurrentWorkflowTaskPollers:        cfg.WorkflowTaskPollers,
		MaxConcurrentActivityTaskPollers:        cfg.ActivityTaskPollers,
	}
	if cfg.StickyCacheSize > 0 {
		worker.SetStickyWorkflowCacheSize(cfg.StickyCacheSize) // process-wide, before the first worker starts
	}
	if cfg.DeploymentName != "" {
		opts.DeploymentOptions = worker.DeploymentOptions{
			UseVersioning:             true,
			Version:                   worker.WorkerDeploymentVersion{DeploymentName: cfg.DeploymentName, BuildID: cfg.BuildID},
			DefaultVersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
		}
	}
	return opts
}

// InstallCRDs checks that deployflow's resources (leases, reservations) are
// served before the worker takes work, or installs them (--install-crds).
func InstallCRDs(lc fx.Lifecycle, cfg config.Config, dyn dynamic.Interface, kc kubernetes.Interface, log *slog.Logger) {
	lc.Append(fx.StartHook(func(ctx context.Context) error {
		if !cfg.InstallCRDs {
			return crds.Check(kc.Discovery())
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := crds.Install(ctx, dyn); err != nil {
			return fmt.Errorf("install deployflow CRDs (leases, hostname and IP reservations): %w", err)
		}
		log.Info("deployflow CRDs installed")
		return nil
	}))
}

// CheckSearchAttributes makes sure deployflow's search attributes exist in
// the worker's Temporal namespace before it takes work: an unregistered one
// would fail every lease workflow's task, again and again. Missing ones are
// registered with --register-search-attributes; otherwise the worker
// refuses to start and names them, with the command that registers them.
func CheckSearchAttributes(lc fx.Lifecycle, cfg config.Config, c client.Client, log *slog.Logger) {
	lc.Append(fx.StartHook(func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		missing, err := searchattr.Missing(ctx, c.OperatorService(), cfg.TemporalNamespace)
		if err != nil || len(missing) == 0 {
			return err
		}
		if !cfg.RegisterSearchAttributes {
			return fmt.Errorf("Temporal namespace %s lacks deployflow's search attributes %s: register them with\n  %s\nor start the worker with --register-search-attributes",
				cfg.TemporalNamespace, strings.Join(missing, ", "), searchattr.CreateCommand(cfg.TemporalNamespace, missing))
		}
		if err := searchattr.Register(ctx, c.OperatorService(), cfg.TemporalNamespace, missing); err != nil {
			return fmt.Errorf("register search attributes %s in Temporal namespace %s: %w", strings.Join(missing, ", "), cfg.TemporalNamespace, err)
		}
		log.Info("search attributes registered", "namespace", cfg.TemporalNamespace, "attributes", missing)
		return nil
	}))
}

// StartWorker starts polling on fx start and stops (draining in-flight
// activities up to WorkerStopTimeout) on fx stop.
func StartWorker(lc fx.Lifecycle, cfg config.Config, w worker.Worker, h *Health, log *slog.Logger) {
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			if err := w.Start(); err != nil {
				return err
			}
			h.workerStarted.Store(true)
			log.Info("worker started", "taskQueue", cfg.TaskQueue, "temporal", cfg.TemporalAddress, "namespace", cfg.TemporalNamespace,
				"version", version.Get().Version, "buildID", cfg.BuildID, "deployment", cfg.DeploymentName)
			return nil
		},
		OnStop: func(context.Context) error {
			h.workerStarted.Store(false)
			w.Stop()
			log.Info("worker stopped")
			return nil
		},
	})
}

// Health backs /healthz (the process serves) and /readyz (the worker polls
// and the Temporal frontend answers).
type Health struct {
	temporal      client.Client
	workerStarted atomic.Bool
}

// NewHealth is the worker's health state.
func NewHealth(c client.Client) *Health { return &Health{temporal: c} }

// Ready reports why the worker is not ready, or nil.
func (h *Health) Ready(ctx context.Context) error {
	if !h.workerStarted.Load() {
		return errNotStarted
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := h.temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}
