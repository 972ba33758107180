package main

import (
	"bytes"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/worker/testenv"
)

// The reduced slice of `make bench-scale` (issue 40.4) that `make test`
// runs: six leases on two workers, held 10 s, a burst of three changes
// with both workers and with one. It checks what the full run prints: every
// lease deployed, each worker's memory at rest and over the hold, the idle
// cost, and each burst's changes all taken by their workflows, with their
// latencies read from the histories. The figures are the full run's
// (docs/performance.md).
func TestScaleModeSlice(t *testing.T) {
	env := testenv.Get(t).Isolated(t)
	temporalNamespace = env.TemporalNamespace
	t.Cleanup(func() { temporalNamespace = "default" })
	if _, err := os.Stat("../../bin/deployflow-worker"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bin/deployflow-worker: run make build first: %v", err)
		}
		t.Skipf("bin/deployflow-worker missing (make build): %v", err)
	}
	var buf bytes.Buffer
	out = &buf
	t.Cleanup(func() { out = os.Stdout })
	scaleLeases, scaleWorkers, scaleHold, scaleSample, scaleBurst = 6, 2, 10*time.Second, 5*time.Second, 3
	t.Cleanup(func() {
		scaleLeases, scaleWorkers, scaleHold, scaleSample, scaleBurst = 0, 3, time.Hour, time.Minute, 500
	})
	require.NoError(t, run(10, time.Second, 0, nil, 0, 0))
	t.Log("\n" + buf.String())
	table := buf.String()

	assert.Regexp(t, `(?m)^created\s+6 leases by deploys, 250 under way at a time, in \S+ \(\d+ a minute\); 0 failed$`, table)
	assert.Regexp(t, `(?m)^solo deploy, to Active\s+\S+ on the empty stack, \S+ with 6 leases present: [\d.]+x`, table)
	assert.Regexp(t, `(?m)^at rest\s+\d+ \d+ MiB resident, each worker \(target <= 2048\); \d+ \d+ workflows in their sticky caches$`, table)
	assert.Regexp(t, `(?m)^over 1\ds\s+\d+ \d+ MiB at its end \(peaks \d+ \d+\): [-+][\d.]+% [-+][\d.]+%`, table)
	assert.Regexp(t, `(?m)^idle\s+[\d.]+ events and [\d.]+ apiserver requests per lease-hour over 7 leases`, table)
	rows := regexp.MustCompile(`(?m)^([12])\s+(\d+)\s+(\d+)\s+\d+\s+\d+\s+\d+\s+(\d+)\s+([\d.]+)\s+(\d+)\s+(\S+)\s+(\S+)$`).FindAllStringSubmatch(table, -1)
	require.Len(t, rows, 2, "a burst row for 2 workers and for 1:\n%s", table)
	for _, r := range rows {
		assert.Equal(t, "0", r[6], "%s workers: every change taken by its lease's workflow", r[1])
		assert.Equal(t, "0", r[4], "%s workers: no send failed", r[1])
		assert.NotEqual(t, "0", r[3], "%s workers: the changes were accepted", r[1])
		_, err := time.ParseDuration(r[8])
		assert.NoError(t, err, "%s workers: a p99 latency", r[1])
	}
}
