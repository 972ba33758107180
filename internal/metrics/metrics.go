// Package metrics holds deployflow's own Prometheus metrics. They live in
// the worker's one registry beside the Temporal SDK's and Go's. Every metric
// has help text and bounded labels (no lease IDs).
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// Metrics are deployflow's metrics.
type Metrics struct {
	DeploySteps       *prometheus.CounterVec
	DeployDuration    *prometheus.HistogramVec
	HostnameConflicts prometheus.Counter
	HostnamesWithheld prometheus.Counter
	KubeRequests      *prometheus.CounterVec
}

// New registers deployflow's metrics on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		DeploySteps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deployflow_deploy_steps_total",
			Help: "Deploy and rollout steps (Temporal activities) run by this worker, by step and result (success or failure).",
		}, []string{"step", "result"}),
		DeployDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "deployflow_deploy_duration_seconds",
			Help:    "Time from the start of a deploy to its end (healthy, failed or rolled back), by result.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}, []string{"result"}),
		HostnameConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deployflow_hostname_conflicts_total",
			Help: "Deploys refused because a hostname is held by another owner's lease.",
		}),
		HostnamesWithheld: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deployflow_hostnames_withheld_total",
			Help: "Hostnames left with the same owner's other lease instead of being taken over.",
		}),
		KubeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deployflow_kube_requests_total",
			Help: "Kubernetes API requests made by this worker, by verb, resource and HTTP status code (0: no response).",
		}, []string{"verb", "resource", "code"}),
	}
	reg.MustRegister(m.DeploySteps, m.DeployDuration, m.HostnameConflicts, m.HostnamesWithheld, m.KubeRequests)
	return m
}

// WrapTransport counts the Kubernetes requests going through rt; use it as
// rest.Config.WrapTransport.
func (m *Metrics) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		code := "0"
		if resp != nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		verb, resource := classify(req)
		m.KubeRequests.WithLabelValues(verb, resource, code).Inc()
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// classify maps a request to a Kubernetes verb and resource, from its path:
// /api/v1/namespaces/ns/pods/name, /apis/apps/v1/replicasets, ...
func classify(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(req.Method), "other"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}
	named := len(parts) >= 2
	if len(parts) > 0 {
		resource = parts[0]
		if len(parts) >= 3 {
			resource += "/" + parts[2] // subresource: status, scale
		}
	}
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = strings.ToLower(req.Method)
	}
	if resource == "" {
		resource = "other"
	}
	return verb, resource
}

// Interceptor counts every activity (local ones too) as a deploy step.
func (m *Metrics) Interceptor() interceptor.WorkerInterceptor { return &workerInterceptor{m: m} }

type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
	m *Metrics
}

func (w *workerInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityInterceptor{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, m: w.m}
}

type activityInterceptor struct {
	interceptor.ActivityInboundInterceptorBase
	m *Metrics
}

func (a *activityInterceptor) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (interface{}, error) {
	out, err := a.Next.ExecuteActivity(ctx, in)
	result := "success"
	if err != nil {
		result = "failure"
	}
	a.m.DeploySteps.WithLabelValues(activity.GetInfo(ctx).ActivityType.Name, result).Inc()
	return out, err
}
