package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/worker/testenv"
)

// The reduced slice of `make bench`'s fleet benchmark that `make test`
// runs: three leases deployed at once by the worker binary, then idle for
// 20s. It checks the table is printed and every deploy succeeded; the
// numbers themselves are the full run's (docs/performance.md).
func TestFleetBenchmarkSlice(t *testing.T) {
	buf := workerBinaryBench(t)
	trafficCanaries = 0 // TestTrafficBenchmarkSlice's
	t.Cleanup(func() { trafficCanaries = 4 })
	statefulReplicas = 0 // the StatefulSet comparison is make bench's only
	t.Cleanup(func() { statefulReplicas = 5 })
	require.NoError(t, run(10, time.Second, 0, []int{3}, 5, 20*time.Second))
	t.Log("\n" + buf.String())

	table := buf.String()
	row := regexp.MustCompile(`(?m)^3\s+\S+\s+\S+\s+\S+\s+(\d+)\s`).FindStringSubmatch(table)
	require.NotNil(t, row, "a row for 3 concurrent deploys:\n%s", table)
	assert.Equal(t, "0", row[1], "errors among 3 concurrent deploys")
	events := regexp.MustCompile(`history events per single-service deploy\s+(\d+) .*, (\d+) besides workflow tasks`).FindStringSubmatch(table)
	require.NotNil(t, events, table)
	n, _ := strconv.Atoi(events[1])
	own, _ := strconv.Atoi(events[2])
	assert.Positive(t, n)
	// Issue 11.3: a one-service first deploy wrote 58 events (36 + 22)
	// before the chain and the rollout's syncs were batched. Issue 22: 22 +
	// 8 on an idle machine (18 besides workflow tasks: the rollout's quick
	// wait sees the pod ready). How many workflow tasks a deploy takes is
	// the server's timing: on the PostgreSQL server with the suite beside
	// it, 28 + 14 = 42 (CI). So the slice bounds the events besides tasks
	// (workflows' TestAOneServiceFirstDeployWritesAtMostEighteenEventsBesidesItsTasks
	// has the exact count): 18, plus the rollout's wait in an activity
	// where the machine is too loaded for the quick wait (scheduled,
	// started, completed: 3), plus the timer that settles an update
	// accepted in the task that ends the run (started, fired: 2). make
	// bench reports the totals.
	assert.LessOrEqual(t, own, 18+3+2, "history events per single-service deploy besides workflow tasks")
	// Issue 22.2: the native Deployment controller's side, in the same run.
	native := regexp.MustCompile(`(?m)^3\s+\S+\s+\S+\s+\S+\s+(\d+) \|\s+\S+\s+\S+\s+\S+\s+(\d+) \| [\d.]+$`).FindStringSubmatch(table)
	require.NotNil(t, native, "a side-by-side row for 3 concurrent deploys:\n%s", table)
	assert.Equal(t, "0", native[1], "deployflow's errors among 3 concurrent deploys")
	assert.Equal(t, "0", native[2], "the native controller's errors among 3 concurrent deploys")
	assert.Regexp(t, `(?m)^kube-apiserver\s+[\d.]+\s+[\d.]+$`, table, "CPU per component, both sides")
	assert.Regexp(t, `(?m)^worker\s+[\d.]+\s+[\d.]+$`, table, "CPU per component: the worker")
	assert.Regexp(t, `idle\s+4 leases for`, table, "the idle leases are measured (5 less the one whose safety net ticks)")
	assert.Regexp(t, `[\d]+ requests per worker-hour besides, whatever the leases`, table, "the worker's own requests apart from its leases' (issue 40.3)")
	assert.Regexp(t, `safety-net tick\s+[\d.]+ events per tick`, table)
	// Issue 40.2: the worker's memory at rest beside the workflows its
	// sticky cache keeps (make bench -worker-sticky-cache-size sizes it).
	assert.Regexp(t, `MiB resident at rest after the idle period, \d+ workflows in its sticky cache \(--sticky-cache-size default, 2000\)`, table)
	// Issue 35: hostile inputs beside 3 deploys, each refused (or, a
	// forged "closed" observation, taken as a hint: the lease stays up),
	// the worker alive, the other deploys all succeeding.
	for _, row := range []string{"one input every 500ms", "inputs flat out"} {
		hostile := regexp.MustCompile(`(?m)^` + row + `\s+\S+\s+\S+\s+\S+\s+(\d+)\s`).FindStringSubmatch(table)
		require.NotNil(t, hostile, "the hostile inputs' table, %s:\n%s", row, table)
		assert.Equal(t, "0", hostile[1], "errors among the deploys beside hostile inputs, %s", row)
	}
	kinds := regexp.MustCompile(`sent +(\d+), not refused \(or lease not kept up\) (\d+)`).FindAllStringSubmatch(table, -1)
	require.Len(t, kinds, 5, "every kind of hostile input:\n%s", table)
	for _, k := range kinds {
		assert.Equal(t, "0", k[2], "a hostile input the worker did not hold: %s", k[0])
	}
	assert.Regexp(t, `targeted leases not Active afterwards\s+0 of 3`, table)
	assert.NotContains(t, table, "the worker died")
	// Issue 22.4: the same changes observed by 1 then 3 workers are sent
	// once each, not once per worker. Issue 40.1: by result, per change,
	// with each worker's RSS, the join burst printed apart.
	rows := regexp.MustCompile(`(?m)^([13])\s+(\d+)\s+(\d+)\s+\d+\s+\d+\s+\d+\s+\d+\s+([\d.]+)\s+\d+\s+\S+\s+([\d ]+)$`).FindAllStringSubmatch(table, -1)
	require.Len(t, rows, 2, "the observers' table, 1 and 3 workers:\n%s", table)
	one, _ := strconv.Atoi(rows[0][2])
	three, _ := strconv.Atoi(rows[1][2])
	assert.GreaterOrEqual(t, one, 8, "4 leases scaled down and up: at least 8 observations")
	assert.Less(t, three, 2*one, "3 workers send each observation once, not once each (1 worker: %d, 3 workers: %d)", one, three)
	for _, r := range rows {
		assert.Len(t, strings.Fields(r[5]), map[string]int{"1": 1, "3": 3}[r[1]], "each worker's RSS, %s workers", r[1])
	}
	assert.Regexp(t, `observers: 2 workers joining \d+ leases sent \d+ observations`, table, "the join burst, apart from the changes")
}

// workerBinaryBench readies a slice of the bench that runs the worker
// binary: the stack, started if needed, and a Temporal namespace of the
// bench's own (the observers' sends it counts are to its leases only,
// whatever else runs on the stack: their observers see every lease of the
// cluster, and send to those with a workflow in their namespace), and
// the bench's tables written to the buffer it returns. The slices run one
// at a time: they set the bench's globals (its output, namespace and
// knobs), and side by side each printed into the other's table (CI run
// 101: both failed).
func workerBinaryBench(t *testing.T) *bytes.Buffer {
	env := testenv.Get(t).Isolated(t)
	benchSlices.Lock()
	t.Cleanup(benchSlices.Unlock) // first registered: runs after the globals are restored
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
	return &buf
}

// benchSlices is held by the slice of the bench that runs.
var benchSlices sync.Mutex

// Guards the idle phase after a batch in which some starts failed: a
// lease whose workflow never started (its start timed out, counted in its
// batch's errors) has no history to measure. Before, historyLengths
// returned "workflow not found" and ended the whole bench before its tables
// (seen with 500 deploys at once on the dev server).
func TestHistoryLengthsSkipsALeaseWhoseWorkflowNeverStarted(t *testing.T) {
	env := testenv.Get(t)
	f := &fleet{temporal: env.Temporal, started: []string{fmt.Sprintf("bench-never-started-%d", time.Now().UnixNano())}}
	lengths, err := f.historyLengths(context.Background())
	require.NoError(t, err)
	assert.Empty(t, lengths, "no run to measure")
}
