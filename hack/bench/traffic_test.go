package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/worker/testenv"
)

// The reduced slice of make bench's traffic benchmark that make test runs:
// one canary through the stack's Gateway, aborted at its second weight,
// and one blue-green switch. It checks the table: each weight's share
// within 5 points over 500 requests, no request failed, the abort on
// stable within 2s, the switch without a failed request; the
// decision-to-serving figures are the full run's (docs/performance.md).
func TestTrafficBenchmarkSlice(t *testing.T) {
	env := testenv.Get(t)
	testenv.DataPlane(t)
	var buf bytes.Buffer
	require.NoError(t, runTraffic(context.Background(), &buf, env.RESTConfig, env.Kube, env.Dynamic, env.Temporal, 1))
	t.Log("\n" + buf.String())
	table := buf.String()
	rows := regexp.MustCompile(`(?m)^(\d+)%\s+([\d.]+)%\s+500\s`).FindAllStringSubmatch(table, -1)
	require.Len(t, rows, 2, "a row for each weight before the abort:\n%s", table)
	for _, r := range rows {
		w, _ := strconv.ParseFloat(r[1], 64)
		share, _ := strconv.ParseFloat(r[2], 64)
		assert.InDelta(t, w, share, 5, "weight %s%%", r[1])
	}
	assert.Regexp(t, `(?m)^failed requests: 0 of \d+`, table, "the canaries lost no request (the blue-green's line is its own)")
	abort := regexp.MustCompile(`abort to every request on stable: (\S+)`).FindStringSubmatch(table)
	require.NotNil(t, abort, table)
	assert.Regexp(t, `switch write to serving: \S+; failed requests: 0 of \d+`, table, "a blue-green switch by the route loses no request")
}
