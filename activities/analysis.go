package activities

import (
	"context"
	"fmt"
	"math"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/promscope"
)

// MeasureInput is one measurement of a canary's analysis.
type MeasureInput struct {
	Query string `json:"query"`
	// Namespace is the rollout's: the query reads only series labelled
	// with it (issue 20.3).
	Namespace string `json:"namespace,omitempty"`
	// Judge: judge the measurement by these conditions (Measurement.Phase).
	Judge *analysis.Conditions `json:"judge,omitempty"`
}

// Measurement is a query's value; Value is nil when there is nothing to
// judge (no data, several series, NaN, no Prometheus), and Message says why.
type Measurement struct {
	Value   *float64 `json:"value,omitempty"`
	Message string   `json:"message,omitempty"`
	// Phase is the measurement judged by the input's conditions (issue
	// 20.1: here, in the activity, never in workflow code); empty when the
	// input had none (runs before the judge-where-measured gate judge it
	// themselves).
	Phase analysis.Phase `json:"phase,omitempty"`
}

// judged is m judged by c, when the caller asked for it. A condition that
// cannot be judged makes the measurement inconclusive, saying why.
func judged(c *analysis.Conditions, m *Measurement, err error) (*Measurement, error) {
	if c == nil || err != nil || m == nil {
		return m, err
	}
	phase, jerr := c.Judge(m.Value)
	if jerr != nil {
		phase, m.Message = analysis.Inconclusive, jerr.Error()
	}
	m.Phase = phase
	return m, nil
}

// MeasurePrometheus runs a canary analysis's PromQL query against the
// worker's Prometheus (--prometheus-url), confined to the series of the
// rollout's namespace (--prometheus-namespace-label) and bounded in time. A scalar, or a vector of one
// sample, is a value. Anything else is a measurement without a value,
// which the analysis counts as inconclusive: what cannot be measured is
// never a failure. An unreachable Prometheus is an error (retried).
func (a *Activities) MeasurePrometheus(ctx context.Context, in MeasureInput) (*Measurement, error) {
	m, err := a.measurePrometheus(ctx, in)
	return judged(in.Judge, m, err)
}

func (a *Activities) measurePrometheus(ctx context.Context, in MeasureInput) (*Measurement, error) {
	if a.Prometheus == nil {
		return &Measurement{Message: "the worker has no Prometheus: start it with --prometheus-url (env DEPLOYFLOW_PROMETHEUS_URL)"}, nil
	}
	if in.Namespace == "" {
		return &Measurement{Message: "not measured: no namespace to confine the query to"}, nil
	}
	label := a.PrometheusLabel
	if label == "" {
		label = promscope.DefaultLabel
	}
	query, err := promscope.Scope(in.Query, label, in.Namespace)
	if err != nil {
		return &Measurement{Message: "not measured: the query " + err.Error()}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	v, _, _, err := a.Prometheus.Query(ctx, query, time.Now(), promv1.WithTimeout(queryTimeout))
	if err != nil {
		return nil, fmt.Errorf("prometheus query %q: %w", query, err)
	}
	var f float64
	switch v := v.(type) {
	case *model.Scalar:
		f = float64(v.Value)
	case model.Vector:
		switch len(v) {
		case 0:
			return &Measurement{Message: "no data: the query returned no series (no traffic yet, or a label that matches nothing)"}, nil
		case 1:
			f = float64(v[0].Value)
		default:
			return &Measurement{Message: fmt.Sprintf("the query returned %d series: aggregate it to one (sum, avg, max)", len(v))}, nil
		}
	default:
		return &Measurement{Message: fmt.Sprintf("the query returned a %s: want a scalar or an instant vector of one series", v.Type())}, nil
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return &Measurement{Message: fmt.Sprintf("the value is %v (a ratio over no requests?)", f)}, nil
	}
	return &Measurement{Value: &f, Message: fmt.Sprintf("%g", f)}, nil
}

// queryTimeout bounds one measurement's query, on Prometheus' side too.
const queryTimeout = 10 * time.Second

// PrometheusAPI is the part of the Prometheus HTTP API analyses use.
type PrometheusAPI interface {
	Query(ctx context.Context, query string, ts time.Time, opts ...promv1.Option) (model.Value, promv1.Warnings, promv1.Infos, error)
}
