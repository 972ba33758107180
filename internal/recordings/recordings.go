// Package recordings reads and writes the workflow histories
// `make record-histories` records into
// testdata/histories/<set>/<test>/<type>-<n>.json.gz, for the replay
// tests. A recording is the history's JSON (Temporal's format, as
// `temporal workflow show --output json` prints it), gzipped: the JSON of
// a history repeats its field names event after event, and compresses
// about five to one (issue 36.4: 66 MB of recordings in four days).
// Recordings made before that are plain .json; both are read.
package recordings

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"
)

// Ext is a recording's file extension.
const Ext = ".json.gz"

// IDFile is where the workflow ID of the recording at path is kept:
// <type>-<n>.id beside <type>-<n>.json.gz (or .json).
func IDFile(path string) string {
	return strings.TrimSuffix(strings.TrimSuffix(path, ".gz"), ".json") + ".id"
}

// Files lists every recording under dir, sorted.
func Files(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, Ext) || strings.HasSuffix(p, ".json")) {
			files = append(files, p)
		}
		return err
	})
	sort.Strings(files)
	return files, err
}

// Write records h at path (which ends in Ext).
func Write(path string, h *historypb.History) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: " "}.Marshal(h)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	z, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	if _, err := z.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := z.Close(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Read reads the recording at path.
func Read(path string) (*historypb.History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer z.Close()
		r = z
	}
	h, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// Replay replays the recorded history at path with r: under the workflow
// ID it ran as where the recording keeps it (recordings since issue 35.2,
// whose lease workflows check their own ID), else under the replayer's own
// ID, as the recordings before it were made to replay.
func Replay(r worker.WorkflowReplayer, logger log.Logger, path string) error {
	h, err := Read(path)
	if err != nil {
		return err
	}
	id, err := os.ReadFile(IDFile(path))
	if errors.Is(err, fs.ErrNotExist) {
		return r.ReplayWorkflowHistory(logger, h)
	}
	if err != nil {
		return err
	}
	return r.ReplayWorkflowHistoryWithOptions(logger, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: strings.TrimSpace(string(id))}})
}
