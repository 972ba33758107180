package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CountLeases counts the running lease workflows by phase, fleet-wide: from
// Temporal's visibility (search attribute DeployflowPhase), not from what one
// worker happened to run.
type CountLeases func(ctx context.Context) (map[string]int64, error)

// LeasesCollector exports deployflow_leases{phase}. Every worker exports the
// same fleet-wide count, right after a restart too; aggregate replicas with
// max by (phase), not sum. Counts are cached for ttl so scrapes of several
// replicas cost Temporal a few count queries per ttl, not per lease.
type LeasesCollector struct {
	desc  *prometheus.Desc
	count CountLeases
	ttl   time.Duration

	mu      sync.Mutex
	at      time.Time
	last    map[string]int64
	lastErr error
}

// NewLeasesCollector counts with count at most once per ttl.
func NewLeasesCollector(count CountLeases, ttl time.Duration) *LeasesCollector {
	return &LeasesCollector{
		desc: prometheus.NewDesc("deployflow_leases",
			"Running lease workflows of this task queue by phase (Deploying, Active, Degraded, Unknown, Failed, TearingDown), fleet-wide from Temporal visibility; every worker reports the same count: aggregate with max, not sum.",
			[]string{"phase"}, nil),
		count: count,
		ttl:   ttl,
	}
}

// Describe implements prometheus.Collector.
func (c *LeasesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. If Temporal cannot be asked, the
// series are absent (an unknown count is not zero).
func (c *LeasesCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := c.counts()
	if err != nil {
		return
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), phase)
	}
}

func (c *LeasesCollector) counts() (map[string]int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= c.ttl {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.last, c.lastErr = c.count(ctx)
		c.at = time.Now()
	}
	return c.last, c.lastErr
}
