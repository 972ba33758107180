package app

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.uber.org/fx"

	"github.com/deployflow/deployflow/internal/version"
)

// NewRegistry is the worker's one Prometheus registry: Go runtime and
// process metrics, the Temporal SDK's metrics, and deployflow's own.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	v := version.Get()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "deployflow_build_info",
			Help:        "The build of deployflow this worker runs (always 1): release version, build ID and Go version.",
			ConstLabels: prometheus.Labels{"version": v.Version, "build_id": v.BuildID, "go_version": v.GoVersion},
		}, func() float64 { return 1 }),
	)
	return reg
}

// NewMetricsHandler exports the Temporal SDK's metrics (temporal_worker_*,
// temporal_activity_*, temporal_request_*, ...) into reg.
func NewMetricsHandler(lc fx.Lifecycle, reg *prometheus.Registry, log *slog.Logger) client.MetricsHandler {
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       reg,
		DefaultTimerType: tallyprom.HistogramTimerType,
		OnRegisterError: func(err error) {
			log.Warn("temporal sdk metric not exported", "error", err)
		},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	lc.Append(fx.StopHook(closer.Close))
	return sdktally.NewMetricsHandler(scope)
}
