package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"

	"github.com/deployflow/deployflow/internal/config"
)

var errNotStarted = errors.New("worker not started")

// NewHTTPHandler serves /metrics (Prometheus text), /healthz and /readyz,
// and with profiling Go's profiles under /debug/pprof/ (--profiling).
func NewHTTPHandler(reg *prometheus.Registry, h *Health, profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := h.Ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index) // heap, goroutine, allocs... by name
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	}
	return mux
}

// ServeHTTP listens on cfg.MetricsAddress when the app starts (so a taken
// port fails start-up) and shuts down gracefully when it stops.
func ServeHTTP(lc fx.Lifecycle, cfg config.Config, reg *prometheus.Registry, h *Health, log *slog.Logger) {
	srv := &http.Server{Handler: NewHTTPHandler(reg, h, cfg.Profiling), ReadHeaderTimeout: 5 * time.Second}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", cfg.MetricsAddress)
			if err != nil {
				return fmt.Errorf("--metrics-address %s: %w", cfg.MetricsAddress, err)
			}
			log.Info("serving /metrics, /healthz, /readyz", "address", ln.Addr().String(), "profiling", cfg.Profiling)
			go func() {
				if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("http server", "error", err)
				}
			}()
			return nil
		},
		OnStop: srv.Shutdown,
	})
}
