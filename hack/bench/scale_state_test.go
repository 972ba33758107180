package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A resumed fleet goes on where the last invocation stopped: the state
// saved is the state read, and a missing file is a new fleet.
func TestTheScaleStateCarriesTheFleetToTheNextInvocation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.json")
	st, err := loadScaleState(path)
	if err != nil || st != nil {
		t.Fatalf("a missing state file: got %+v, %v; want a new fleet (nil, nil)", st, err)
	}
	start := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	want := &scaleState{Prefix: "bs1a2b", TaskQueue: "bench-scale-1", Leases: 9001, Failed: 2, SoloEmpty: 640 * time.Millisecond,
		Segments: []scaleSegment{{Start: start, Leases: 6000, Took: 50 * time.Minute}, {Start: start.Add(24 * time.Hour), Leases: 3000, Took: 30 * time.Minute}}}
	if err := want.save(path); err != nil {
		t.Fatal(err)
	}
	got, err := loadScaleState(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Prefix != want.Prefix || got.TaskQueue != want.TaskQueue || got.Leases != want.Leases || got.Failed != want.Failed ||
		got.SoloEmpty != want.SoloEmpty || len(got.Segments) != 2 || !got.Segments[1].Start.Equal(want.Segments[1].Start) {
		t.Fatalf("read back %+v, saved %+v", got, want)
	}
	if n, took := got.created(); n != 9000 || took != 80*time.Minute {
		t.Fatalf("created() = %d in %s, want 9000 in 1h20m (the segments' sums)", n, took)
	}
	if _, err := os.Stat(path + ".tmp"); err == nil {
		t.Fatal("the temporary file was left beside the state")
	}
	if err := os.WriteFile(path, []byte(`{"leases": 5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadScaleState(path); err == nil || !strings.Contains(err.Error(), "remove it to start a new fleet") {
		t.Fatalf("a state with no prefix or task queue: got %v, want an error saying how to start over", err)
	}
}

// -scale-create-for: once the bound is passed no deploy starts, and the
// ones started are exactly the first ones (the fleet's lease names are
// its prefix and a count), each run to its end.
func TestForEachUntilStartsNoneAfterItsStopAndTheStartedAreAPrefix(t *testing.T) {
	var ran [100]atomic.Bool
	var calls atomic.Int32
	started, err := forEachUntil(100, 4, func() bool { return calls.Load() >= 10 }, func(i int) error {
		calls.Add(1)
		time.Sleep(time.Millisecond)
		ran[i].Store(true)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if started < 10 || started > 14 {
		t.Fatalf("started %d, want 10 to 14 (stop turns true at the 10th call; 4 at a time, so up to 4 more were started before it was seen)", started)
	}
	for i := range ran {
		if ran[i].Load() != (i < started) {
			t.Fatalf("do(%d) ran: %v, with %d started: want exactly do(0) to do(%d)", i, ran[i].Load(), started, started-1)
		}
	}
	if n, _ := forEachUntil(5, 2, func() bool { return false }, func(int) error { return nil }); n != 5 {
		t.Fatalf("with no stop: started %d of 5", n)
	}
}
