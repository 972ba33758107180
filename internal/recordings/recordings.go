// Package recordings reads the workflow histories `make record-histories`
// records into testdata/histories/<set>/<test>/<type>-<n>.json, for the
// replay tests.
package recordings

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// IDFile is where the workflow ID of the recording at path is kept:
// <type>-<n>.id beside <type>-<n>.json.
func IDFile(path string) string { return strings.TrimSuffix(path, ".json") + ".id" }

// Replay replays the recorded history at path with r: under the workflow
// ID it ran as where the recording keeps it (recordings since issue 35.2,
// whose lease workflows check their own ID), else under the replayer's own
// ID, as the recordings before it were made to replay.
func Replay(r worker.WorkflowReplayer, logger log.Logger, path string) error {
	id, err := os.ReadFile(IDFile(path))
	if errors.Is(err, fs.ErrNotExist) {
		return r.ReplayWorkflowHistoryFromJSONFile(logger, path)
	}
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return r.ReplayWorkflowHistoryWithOptions(logger, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: strings.TrimSpace(string(id))}})
}
