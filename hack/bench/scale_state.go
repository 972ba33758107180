package main

// A scale-mode fleet created over several sessions of a machine
// (-scale-state, -scale-create-for). On the 2-core machine, 20,000 leases
// by deploys take hours, more than a session, and the project's CI runs
// on the same machine between sessions. So one invocation creates the
// leases it can within -scale-create-for and ends, leaving them; the
// stack goes down keeping its data (bin/devstack down --keep-data, in a
// run directory of its own: DEPLOYFLOW_RUN_DIR); the next session brings
// the same stack up and invokes the bench again with the same state,
// which restarts the workers on the fleet's task queue and goes on. The
// invocation that completes the fleet measures it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// scaleState is what the next invocation needs of the fleet so far.
type scaleState struct {
	// Prefix and TaskQueue are the fleet's: its leases are Prefix-0 to
	// Prefix-(Leases-1), their workflows on TaskQueue.
	Prefix    string `json:"prefix"`
	TaskQueue string `json:"taskQueue"`
	Leases    int    `json:"leases"`
	Failed    int    `json:"failed"`
	// SoloEmpty is the reference deploy's time on the empty stack,
	// measured by the first invocation.
	SoloEmpty time.Duration `json:"soloEmpty"`
	// Segments are the creation's parts, one per invocation.
	Segments []scaleSegment `json:"segments"`
}

// scaleSegment is one invocation's part of the creation.
type scaleSegment struct {
	Start  time.Time     `json:"start"`
	Leases int           `json:"leases"`
	Took   time.Duration `json:"took"`
}

// created is the creation so far: leases created by deploys in how long,
// over how many segments.
func (s *scaleState) created() (leases int, took time.Duration) {
	for _, g := range s.Segments {
		leases += g.Leases
		took += g.Took
	}
	return leases, took
}

// loadScaleState reads the state at path; a missing file is a new fleet
// (nil).
func loadScaleState(path string) (*scaleState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s scaleState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("-scale-state %s: %w", path, err)
	}
	if s.Prefix == "" || s.TaskQueue == "" || s.Leases < 0 {
		return nil, fmt.Errorf("-scale-state %s: no fleet in it (prefix, task queue and a lease count are needed); remove it to start a new fleet", path)
	}
	return &s, nil
}

// save writes the state at path, whole or not at all.
func (s *scaleState) save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
