// Package app wires deployflow's worker with fx: configuration, logging, the
// Temporal and Kubernetes clients, one Prometheus registry served with health
// endpoints, and the Temporal worker itself.
package app

import (
	"context"
	"log/slog"
	"os"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"k8s.io/client-go/kubernetes"

	"github.com/deployflow/deployflow/internal/config"
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
			NewKubeClient,
			NewWorker,
			NewHealth,
		),
		fx.WithLogger(func(log *slog.Logger) fxevent.Logger {
			l := &fxevent.SlogLogger{Logger: log}
			l.UseLogLevel(slog.LevelDebug)
			return l
		}),
		fx.Invoke(StartWorker, ServeHTTP),
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
	c, err := client.DialContext(context.Background(), client.Options{
		HostPort:       cfg.TemporalAddress,
		Namespace:      cfg.TemporalNamespace,
		Logger:         sdklog.NewStructuredLogger(log.With("component", "temporal-sdk")),
		MetricsHandler: mh,
	})
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(c.Close))
	return c, nil
}

// NewKubeClient builds the Kubernetes client the activities use.
func NewKubeClient(cfg config.Config) (kubernetes.Interface, error) {
	return kube.NewClientset(cfg.Kubeconfig, "deployflow-worker")
}
