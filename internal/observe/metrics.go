package observe

import "github.com/prometheus/client_golang/prometheus"

// Send results, as deployflow_observer_sends_total{result} counts them.
const (
	SentAccepted   = "accepted"    // the workflow took it
	SentKnown      = "known"       // it knew already (another worker told it)
	SentDeferred   = "deferred"    // it is deploying: sent again when the deploy ends
	SentNoWorkflow = "no_workflow" // the lease has no running workflow
	SentRejected   = "rejected"    // the workflow refused it: not sent again until the lease changes
	SentError      = "error"       // Temporal did not answer: retried
)

// observerMetrics are the observer's own series.
type observerMetrics struct {
	sends *prometheus.CounterVec
}

// Collectors are the observer's metrics: the observations it sent by
// result, the leases it observes and the live members of its group.
func (o *Observer) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		o.metrics.sends,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "deployflow_observer_owned_leases",
			Help: "Leases whose observations this worker sends (with several workers, its share of the cluster's leases).",
		}, func() float64 { return float64(o.ownedLeases()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "deployflow_observer_members",
			Help: "Live workers this worker shares the leases' observations with, itself included.",
		}, func() float64 { return float64(len(o.liveMembers())) }),
	}
}

func newObserverMetrics() observerMetrics {
	m := observerMetrics{sends: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deployflow_observer_sends_total",
		Help: "Observations this worker's observer sent to lease workflows, by result (accepted, known, deferred, no_workflow, rejected, error).",
	}, []string{"result"})}
	for _, r := range []string{SentAccepted, SentKnown, SentDeferred, SentNoWorkflow, SentRejected, SentError} {
		m.sends.WithLabelValues(r)
	}
	return m
}
