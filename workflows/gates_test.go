package workflows

import (
	"fmt"
	"go/ast"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/deployflow/deployflow/internal/recordings"
	"github.com/deployflow/deployflow/workflows/internal/flow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Issue 21.2: version gates have one home. Outside the legacy.go files (and internal/flow/gates.go,
// which defines them) no code asks a gate or reads how a run differs from
// the current path: the main files read only the current path. In
// legacy.go, the functions that name each change are exactly the table's
// Guards. Before, 12 change IDs were asked at 16 places and a `fewer` flag
// was read at 12 more, across 6 files.
func TestGatesAreAskedOnlyInTheLegacyFile(t *testing.T) {
	fset, files := parseWorkflows(t)
	ids := map[string]string{} // constant name → change ID
	for _, g := range flow.Gates {
		ids[constantOf(t, g.ID)] = g.ID
	}
	asked := map[string][]string{} // change ID → legacy.go functions naming it
	for path, file := range files {
		name := filepath.Base(path)
		if path == gatesFile {
			continue
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				var what string
				switch n := n.(type) {
				case *ast.Ident:
					if id, ok := ids[n.Name]; ok {
						if name == "legacy.go" {
							asked[id] = append(asked[id], funcName(fn))
						}
						what = "names " + n.Name
					}
					if strings.HasPrefix(path, "internal/flow/") && (n.Name == "Gate" || n.Name == "ReplayGatesKey") {
						what = "asks a gate"
					}
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "flow" && (n.Sel.Name == "Gate" || n.Sel.Name == "ReplayGatesKey") {
						what = "asks a gate"
					}
					switch n.Sel.Name {
					case "GetVersion", "batched":
						what = "uses " + n.Sel.Name
					}
				}
				if what != "" && name != "legacy.go" {
					t.Errorf("%s: %s %s outside legacy.go: ask a method of legacy.go named for the current path", fset.Position(n.Pos()), funcName(fn), what)
				}
				return true
			})
		}
	}
	for _, g := range flow.Gates {
		got := unique(asked[g.ID])
		assert.Equal(t, sorted(g.Guards), got, "%s: the table's Guards are not the legacy.go functions that name it", g.ID)
	}
}

// Every version constant is a row of the table, once.
func constantOf(t *testing.T, id string) string {
	t.Helper()
	src, err := os.ReadFile(gatesFile)
	require.NoError(t, err)
	for _, line := range strings.Split(string(src), "\n") {
		if name, value, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.TrimSpace(value) == fmt.Sprintf("%q", id) {
			return strings.TrimSpace(name)
		}
	}
	t.Fatalf("no constant for change %s in %s", id, gatesFile)
	return ""
}

func TestEveryGateIsInTheTableOnce(t *testing.T) {
	src, err := os.ReadFile(gatesFile)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, g := range flow.Gates {
		seen[g.ID]++
	}
	for _, line := range strings.Split(string(src), "\n") {
		if name, value, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.HasPrefix(strings.ToLower(strings.TrimSpace(name)), "version") {
			id := strings.Trim(strings.TrimSpace(value), `"`)
			assert.Equal(t, 1, seen[id], "change %s (%s) is not in the table once", id, strings.TrimSpace(name))
		}
	}
}

// The table's Needing is what the recordings say: with a gate forced to
// its new path, exactly the listed sets have a history that no longer
// replays. So the table says which recordings each gate's retirement
// drops, and a new recording that reaches an old path shows here.
func TestTheGateTableNamesTheRecordingsEachGateNeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every recording, and again with each gate it asks forced (about 15s)")
	}
	files, err := recordings.Files(historiesDir)
	require.NoError(t, err)
	require.NotEmpty(t, files)
	// CPU-bound, and needing nothing of the package's other tests: it runs
	// beside them.
	t.Parallel()

	// Each recording once as it is, noting the gates its replay asks: a
	// gate forced to its new path changes nothing in a replay that never
	// asks it, so only the replays that ask a gate run again with it
	// forced.
	asked := make([]map[string]bool, len(files))
	failed := replayAll(t, files, func(i int) flow.ReplayGates {
		asked[i] = map[string]bool{}
		return flow.ReplayGates{Asked: func(id string) { asked[i][id] = true }}
	})
	for i, f := range files {
		require.False(t, failed[i], "%s does not replay on the current code (TestRecordedHistoriesReplay says why)", f)
	}
	for _, g := range flow.Gates {
		var asking []string
		for i, f := range files {
			if asked[i][g.ID] {
				asking = append(asking, f)
			}
		}
		fails := replayAll(t, asking, func(int) flow.ReplayGates {
			return flow.ReplayGates{NewPath: map[string]bool{g.ID: true}, Asked: func(string) {}}
		})
		var failing []string
		for i, f := range asking {
			if fails[i] {
				rel, _ := filepath.Rel(historiesDir, f)
				set, _, _ := strings.Cut(rel, string(filepath.Separator))
				failing = append(failing, set)
			}
		}
		assert.Equal(t, sorted(g.Needing), unique(failing), "%s: the recordings that need its old path", g.ID)
		if g.Since != "" {
			_, err := os.Stat(filepath.Join(historiesDir, g.Since))
			assert.NoError(t, err, "%s: Since names no recorded set", g.ID)
		}
	}
}

// replayAll replays files, one per CPU at a time (independent and
// CPU-bound), each with the flow.ReplayGates gates(i) gives its workflows, and
// reports which failed.
func replayAll(t *testing.T, files []string, gates func(i int) flow.ReplayGates) []bool {
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	fails := make([]bool, len(files))
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, f := range files {
		slots <- struct{}{}
		g := gates(i)
		wg.Go(func() {
			defer func() { <-slots }()
			// Determinism, not time: no 1 s deadlock check, which a replay
			// starved of CPU failed (local CI run 99: a set counted as
			// needing fewer-events' old path).
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DisableDeadlockDetection: true,
				Interceptors: []interceptor.WorkerInterceptor{&withGates{gates: g}}})
			if err != nil {
				t.Error(err)
				return
			}
			Register(r)
			fails[i] = recordings.Replay(r, logger, f) != nil
		})
	}
	wg.Wait()
	return fails
}

const historiesDir = "../testdata/histories"

// gatesFile holds the gate table and the gates' constants.
const gatesFile = "internal/flow/gates.go"

// withGates is a replayer's interceptor that puts gates in the context of
// the workflows it replays (flow.ReplayGatesKey).
type withGates struct {
	interceptor.WorkerInterceptorBase
	gates flow.ReplayGates
}

func (w *withGates) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &withGatesInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, gates: w.gates}
}

type withGatesInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	gates flow.ReplayGates
}

func (i *withGatesInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return i.Next.ExecuteWorkflow(workflow.WithValue(ctx, flow.ReplayGatesKey{}, i.gates), in)
}

// The gate table of docs/upgrading.md ("Changing workflow code") is the
// table in gates.go.
func TestTheGateTableIsTheDocs(t *testing.T) {
	page, err := os.ReadFile("../docs/upgrading.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(page), "<!-- gates -->\n")
	require.True(t, ok, "docs/upgrading.md has no <!-- gates --> table")
	table, _, ok := strings.Cut(rest, "<!-- /gates -->")
	require.True(t, ok, "docs/upgrading.md's <!-- gates --> table has no <!-- /gates --> end")
	assert.Equal(t, gateTable(), table, "docs/upgrading.md's gate table differs from gates.go's (want the text above)")
}

// gateTable is docs/upgrading.md's table of gates, from the table in
// gates.go.
func gateTable() string {
	var b strings.Builder
	b.WriteString("| change ID | what it changed | asked in `legacy.go` | first recorded with | recordings that need its old path |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	code := func(list []string) string {
		if len(list) == 0 {
			return "none"
		}
		out := make([]string, len(list))
		for i, s := range list {
			out[i] = "`" + s + "`"
		}
		return strings.Join(out, ", ")
	}
	for _, g := range flow.Gates {
		changed := g.Changed
		if g.Carried {
			changed += " (carried: a run hands its old path on to the runs it continues as)"
		}
		since := "tests only"
		if g.Since != "" {
			since = "`" + g.Since + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", g.ID, changed, code(g.Guards), since, code(sorted(g.Needing)))
	}
	return b.String()
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

func sorted(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	out := append([]string{}, list...)
	sort.Strings(out)
	return out
}

func unique(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// A retired change's ID is never a gate again: a run that recorded its
// marker would replay a new change's path as if it had taken it.
func TestARetiredChangeIDIsNeverReused(t *testing.T) {
	require.NotEmpty(t, flow.Retired)
	current := map[string]bool{}
	for _, g := range flow.Gates {
		current[g.ID] = true
	}
	seen := map[string]bool{}
	for _, id := range flow.Retired {
		assert.False(t, current[id], "change %s is retired: give a new change a new ID", id)
		assert.False(t, seen[id], "change %s is listed as retired twice", id)
		seen[id] = true
	}
}
