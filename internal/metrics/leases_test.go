package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deployflow_leases is what visibility counts, fetched at most once per
// ttl; when Temporal cannot be asked the series are absent, never zero.
func TestLeasesCollectorExportsTheFleetCountAndNothingWhenItCannotCount(t *testing.T) {
	calls := 0
	var fail error
	c := NewLeasesCollector(func(context.Context) (map[string]int64, error) {
		calls++
		return map[string]int64{"Active": 20, "Failed": 1}, fail
	}, time.Hour)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP deployflow_leases Running lease workflows of this task queue by phase (Deploying, Active, Degraded, Unknown, Failed, TearingDown), fleet-wide from Temporal visibility; every worker reports the same count: aggregate with max, not sum.
# TYPE deployflow_leases gauge
deployflow_leases{phase="Active"} 20
deployflow_leases{phase="Failed"} 1
`), "deployflow_leases"))
	_, err := reg.Gather()
	require.NoError(t, err)
	assert.Equal(t, 1, calls, "cached for the ttl")

	fail = errors.New("temporal unavailable")
	c.at = time.Time{}
	n, err := testutil.GatherAndCount(reg, "deployflow_leases")
	require.NoError(t, err)
	assert.Zero(t, n, "no series when the count failed")
}
