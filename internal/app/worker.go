package app

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/fx"
	"k8s.io/client-go/kubernetes"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/workflows"
)

// Register puts deployflow's workflows and activities on a worker. The
// worker binary and the integration tests' in-process workers share it.
func Register(w worker.Registry, acts *activities.Activities) {
	w.RegisterWorkflow(workflows.RolloutWorkflow)
	w.RegisterActivity(acts)
}

// NewWorker builds the Temporal worker polling cfg.TaskQueue.
func NewWorker(cfg config.Config, c client.Client, kube kubernetes.Interface) worker.Worker {
	w := worker.New(c, cfg.TaskQueue, worker.Options{
		// Activities get this long to finish on SIGTERM; the heartbeating
		// waits return promptly and are retried by the next worker.
		WorkerStopTimeout: 5 * time.Second,
	})
	Register(w, &activities.Activities{Kube: kube})
	return w
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
			log.Info("worker started", "taskQueue", cfg.TaskQueue, "temporal", cfg.TemporalAddress, "namespace", cfg.TemporalNamespace)
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
