package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/deployflow/deployflow/internal/recordings"
)

// RecordHistoriesEnv names the directory `make record-histories` has the
// integration tests write their workflows' histories to; unset, nothing is
// recorded.
const RecordHistoriesEnv = "DEPLOYFLOW_RECORD_HISTORIES"

// recordHistories, when RecordHistoriesEnv is set, registers a cleanup that
// writes the history of every workflow run on task queue tq (and its
// clusters' queues, tq@<cluster>) to
// <dir>/<test name>/<workflow type>-<n>.json, in start order. The replay test
// (workflows/replay_test.go) replays them against the current code. Existing
// files are never overwritten: old histories stay as they were recorded.
func (e *Env) recordHistories(t testing.TB, tq string) {
	dir := os.Getenv(RecordHistoriesEnv)
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("histories not recorded: the test failed")
			return
		}
		if err := e.writeHistories(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")), tq); err != nil {
			t.Errorf("record histories: %v", err)
		}
	})
}

func (e *Env) writeHistories(dir, tq string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	time.Sleep(time.Second) // visibility catches up with the last runs
	var execs []*workflowservice.ListWorkflowExecutionsResponse
	var token []byte
	for {
		resp, err := e.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			// Its clusters' queues too (tq@<cluster>: a placement's waves).
			Query: fmt.Sprintf("TaskQueue = %q OR TaskQueue STARTS_WITH %q", tq, tq+"@"), NextPageToken: token})
		if err != nil {
			return err
		}
		execs = append(execs, resp)
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	type run struct {
		typ, id, runID string
		start          time.Time
	}
	var runs []run
	for _, page := range execs {
		for _, x := range page.Executions {
			if x.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				continue // a run the test left running has no end to replay to
			}
			runs = append(runs, run{x.GetType().GetName(), x.GetExecution().GetWorkflowId(), x.GetExecution().GetRunId(), x.GetStartTime().AsTime()})
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].start.Before(runs[j].start) })
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	seq := map[string]int{}
	for _, r := range runs {
		seq[r.typ]++
		path := filepath.Join(dir, fmt.Sprintf("%s-%02d%s", r.typ, seq[r.typ], recordings.Ext))
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("%s exists: recorded histories are never rewritten; record into a new directory", path)
		}
		h := &historypb.History{}
		it := e.Temporal.GetWorkflowHistory(ctx, r.id, r.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return fmt.Errorf("history of %s/%s: %w", r.id, r.runID, err)
			}
			h.Events = append(h.Events, ev)
		}
		if !decided(h) {
			seq[r.typ]--
			continue // terminated before its first workflow task: nothing to replay
		}
		if err := recordings.Write(path, h); err != nil {
			return err
		}
		// The ID it ran as: a lease's workflow checks its own (issue 35.2).
		if err := os.WriteFile(recordings.IDFile(path), []byte(r.id+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// decided reports whether a history has a completed workflow task.
func decided(h *historypb.History) bool {
	for _, ev := range h.Events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return true
		}
	}
	return false
}
