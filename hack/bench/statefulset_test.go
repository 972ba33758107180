package main

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The StatefulSet comparison's order of replacement: each ordinal once,
// in the order it was first seen on the update revision (pods of the old
// revision, and an ordinal seen again, do not count), with the time the
// rollout spent before, between and after the replacements.
func TestTheStatefulSetOrderOfReplacementCountsEachOrdinalOnceOnTheUpdateRevision(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	seen := []podRevision{
		{0, "v1", at(-3000)}, {1, "v1", at(-2000)}, {2, "v1", at(-1000)},
		{2, "v2", at(100)}, {1, "v2", at(1200)}, {1, "v2", at(1300)}, {0, "v2", at(2300)},
	}
	var r stsResult
	r.timeline(seen, "v2", start, at(3400))
	assert.Equal(t, []int32{2, 1, 0}, r.order)
	assert.Equal(t, 3400*time.Millisecond, r.wall)
	assert.Equal(t, 100*time.Millisecond, r.first)
	assert.Equal(t, 1100*time.Millisecond, r.step, "the mean between the first and the last")
	assert.Equal(t, 1100*time.Millisecond, r.tail)
	assert.Equal(t, "2>1>0", formatOrder(r.order))
	assert.Equal(t, "-", formatOrder(nil))

	assert.True(t, highestFirst([]int32{2, 1, 0}, 3))
	assert.False(t, highestFirst([]int32{0, 1, 2}, 3), "lowest first")
	assert.False(t, highestFirst([]int32{2, 1}, 3), "an ordinal never replaced")
	assert.False(t, highestFirst(nil, 3))

	var none stsResult
	none.timeline(seen, "v3", start, at(500))
	assert.Empty(t, none.order)
	assert.Zero(t, none.first)
}

// The table: medians of the runs, the order when every run agrees
// ("varies" and DIFFERENT when not), the ratio to the native controller.
func TestTheStatefulSetTablePrintsMediansAndTheOrder(t *testing.T) {
	var buf bytes.Buffer
	out = &buf
	t.Cleanup(func() { out = os.Stdout })
	order := []int32{2, 1, 0}
	native := []stsResult{{wall: 3 * time.Second, requests: 20, order: order}, {wall: 4 * time.Second, requests: 30, order: order},
		{wall: 5 * time.Second, requests: 25, order: order}}
	engine := []stsResult{{wall: 4200 * time.Millisecond, requests: 40, controller: 22, events: 60, order: order},
		{wall: 4100 * time.Millisecond, requests: 41, controller: 21, events: 60, order: order},
		{wall: 4400 * time.Millisecond, requests: 43, controller: 20, events: 62, order: order}}
	assert.Equal(t, order, commonOrder(engine))
	printStatefulTable(3, stsMedian(native), stsMedian(engine), commonOrder(native), commonOrder(engine))
	table := buf.String()
	assert.Regexp(t, `(?m)^native StatefulSet controller\s+3 2>1>0\s+4s\s+1\.000\s+25\s+-\s+-$`, table)
	assert.Regexp(t, `(?m)^deployflow \(partition steps\)\s+3 2>1>0\s+4\.2s\s+1\.050\s+41\s+21\s+60$`, table)
	assert.Contains(t, table, "order of replacement: the same (highest ordinal down: native true, deployflow true)")
	assert.Contains(t, table, "wall-time ratio deployflow/native: 1.050")

	buf.Reset()
	engine[1].order = []int32{0, 1, 2}
	assert.Nil(t, commonOrder(engine), "the runs disagree")
	printStatefulTable(3, stsMedian(native), stsMedian(engine), commonOrder(native), commonOrder(engine))
	assert.Regexp(t, `(?m)^deployflow \(partition steps\)\s+3 varies\s`, buf.String())
	assert.Contains(t, buf.String(), "order of replacement: DIFFERENT")
}
