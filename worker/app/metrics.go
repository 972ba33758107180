package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.uber.org/fx"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/metrics"
	"github.com/deployflow/deployflow/internal/searchattr"
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

// LeasePhases are the phases of a running lease workflow that
// deployflow_leases counts (TornDown ends the workflow).
var LeasePhases = []string{api.PhaseDeploying, api.PhaseAwaitingApproval, api.PhaseActive, api.PhaseDegraded,
	api.PhaseUnknown, api.PhaseFailed, api.PhaseTearingDown, api.PhaseAborted}

// RegisterLeasesCollector exports deployflow_leases{phase}, counted from
// Temporal visibility for this worker's task queue: right with several
// workers and after a restart. One count query per phase every 15 s.
func RegisterLeasesCollector(reg *prometheus.Registry, cfg config.Config, c client.Client) {
	reg.MustRegister(metrics.NewLeasesCollector(func(ctx context.Context) (map[string]int64, error) {
		out := map[string]int64{}
		for _, phase := range LeasePhases {
			resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
				Namespace: cfg.TemporalNamespace,
				Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND TaskQueue = '%s' AND %s = '%s'",
					"DeployWorkflow", cfg.TaskQueue, searchattr.Phase.GetName(), phase),
			})
			if err != nil {
				return nil, err
			}
			out[phase] = resp.GetCount()
		}
		return out, nil
	}, 15*time.Second))
}
