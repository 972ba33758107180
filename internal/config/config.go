// Package config holds the settings the worker and the CLI share. Each has a
// flag and an environment variable; the flag wins.
package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
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
	TemporalAddress   string // TEMPORAL_ADDRESS
	TemporalNamespace string // TEMPORAL_NAMESPACE
	TaskQueue         string // DEPLOYFLOW_TASK_QUEUE
	Kubeconfig        string // KUBECONFIG; empty means in-cluster
	MetricsAddress    string // DEPLOYFLOW_METRICS_ADDRESS (worker only)
	LogLevel          string // DEPLOYFLOW_LOG_LEVEL: debug, info, warn, error
	LogFormat         string // DEPLOYFLOW_LOG_FORMAT: text or json
}

// RegisterFlags binds c to fs, with defaults taken from the environment.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.TemporalAddress, "temporal-address", env("TEMPORAL_ADDRESS", DefaultTemporalAddress), "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
	fs.StringVar(&c.TemporalNamespace, "temporal-namespace", env("TEMPORAL_NAMESPACE", DefaultNamespace), "Temporal namespace (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&c.TaskQueue, "task-queue", env("DEPLOYFLOW_TASK_QUEUE", DefaultTaskQueue), "Temporal task queue of the deployflow worker (env DEPLOYFLOW_TASK_QUEUE)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig path; empty means in-cluster config (env KUBECONFIG)")
	fs.StringVar(&c.MetricsAddress, "metrics-address", env("DEPLOYFLOW_METRICS_ADDRESS", DefaultMetricsAddress), "address serving /metrics, /healthz and /readyz (env DEPLOYFLOW_METRICS_ADDRESS)")
	fs.StringVar(&c.LogLevel, "log-level", env("DEPLOYFLOW_LOG_LEVEL", "info"), "log level: debug, info, warn or error (env DEPLOYFLOW_LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", env("DEPLOYFLOW_LOG_FORMAT", "text"), "log format: text or json (env DEPLOYFLOW_LOG_FORMAT)")
}

// FromEnv is the configuration the environment alone gives.
func FromEnv() Config {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("env", flag.ContinueOnError))
	return c
}

// Validate names the first bad setting and how to fix it.
func (c Config) Validate() error {
	var errs []error
	if c.TemporalAddress == "" || !strings.Contains(c.TemporalAddress, ":") {
		errs = append(errs, fmt.Errorf("--temporal-address %q: want host:port, e.g. %s", c.TemporalAddress, DefaultTemporalAddress))
	}
	if c.TemporalNamespace == "" {
		errs = append(errs, errors.New("--temporal-namespace is empty: set it or TEMPORAL_NAMESPACE (e.g. default)"))
	}
	if c.TaskQueue == "" {
		errs = append(errs, errors.New("--task-queue is empty: set it or DEPLOYFLOW_TASK_QUEUE (e.g. deployflow)"))
	}
	if _, err := c.SlogLevel(); err != nil {
		errs = append(errs, err)
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
