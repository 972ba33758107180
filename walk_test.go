package deployflow_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walkStep is a row of the walk table of docs/architecture.md.
type walkStep struct {
	step     int
	file     string
	entry    string // the function (or method) the manifest enters the file at
	from     int    // the earlier step it comes from; 0: from Temporal
	via      string // the state the earlier step hands it on in, if not a call
	defaults bool   // the step that fills the manifest's defaults
}

// Issue 21: a walk of a manifest through one deploy visits each file once,
// in order, and its defaults are filled once. The walk table of
// docs/architecture.md is the walk; this checks it against the code, so a
// step that moves to another file, a file the walk enters twice, a step
// reached from nowhere before it, or a step after the chain's start that
// fills the defaults again (as the activities did, and the chain's
// keepRestarts) fails here.
func TestAManifestsWalkVisitsEachFileOnceInOrder(t *testing.T) {
	steps := readWalk(t)
	require.GreaterOrEqual(t, len(steps), 10, "the walk table of docs/architecture.md was read")

	files := map[string]*ast.File{}
	fset := token.NewFileSet()
	defaultsAt := 0
	for i, s := range steps {
		require.Equal(t, i+1, s.step, "the steps are numbered in order")
		_, seen := files[s.file]
		require.False(t, seen, "step %d: the walk enters %s twice", s.step, s.file)
		f, err := parser.ParseFile(fset, s.file, nil, 0)
		require.NoError(t, err, "step %d", s.step)
		files[s.file] = f
		require.NotNil(t, funcDecl(f, s.entry), "step %d: %s declares no function %s", s.step, s.file, s.entry)
		if s.defaults {
			require.Zero(t, defaultsAt, "one step fills the defaults")
			defaultsAt = s.step
		}
	}
	require.NotZero(t, defaultsAt, "a step is marked as filling the defaults")

	for _, s := range steps {
		if s.from == 0 {
			continue
		}
		require.Less(t, s.from, s.step, "step %d comes from a step before it", s.step)
		prev := steps[s.from-1]
		if s.via != "" {
			assert.True(t, mentions(files[prev.file], s.via), "step %d: %s never sets %s", s.step, prev.file, s.via)
			assert.True(t, mentions(funcDecl(files[s.file], s.entry), s.via), "step %d: %s never reads %s", s.step, s.entry, s.via)
			continue
		}
		assert.True(t, mentions(files[prev.file], s.entry), "step %d: %s (step %d) never reaches %s", s.step, prev.file, s.from, s.entry)
	}

	// Defaults once: the defaults step fills them in its entry function,
	// once; no step after it, and no activity, fills them again.
	for _, s := range steps {
		calls := withDefaultsCalls(files[s.file])
		switch {
		case s.defaults:
			inEntry := withDefaultsCalls(funcDecl(files[s.file], s.entry))
			assert.Len(t, inEntry, 1, "step %d fills the defaults once, in %s", s.step, s.entry)
		case s.step > defaultsAt:
			for _, pos := range calls {
				t.Errorf("step %d: %s fills the defaults again at %s", s.step, s.file, fset.Position(pos))
			}
		}
	}
	activities, err := filepath.Glob("activities/*.go")
	require.NoError(t, err)
	for _, name := range activities {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, pos := range withDefaultsCalls(f) {
			t.Errorf("%s fills a manifest's defaults at %s: activities check them (manifest.HasDefaults)", name, fset.Position(pos))
		}
	}
}

func funcDecl(f *ast.File, name string) *ast.FuncDecl {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name {
			return fd
		}
	}
	return nil
}

// mentions reports whether the node uses name (an identifier or a selector),
// not counting a function's own name.
func mentions(n ast.Node, name string) bool {
	if n == nil {
		return false
	}
	found := false
	ast.Inspect(n, func(x ast.Node) bool {
		switch x := x.(type) {
		case *ast.FuncDecl:
			if x.Body != nil {
				ast.Inspect(x.Body, func(y ast.Node) bool {
					if id, ok := y.(*ast.Ident); ok && id.Name == name {
						found = true
					}
					return !found
				})
			}
			return false
		case *ast.Ident:
			found = found || x.Name == name
		}
		return !found
	})
	return found
}

func withDefaultsCalls(n ast.Node) []token.Pos {
	var out []token.Pos
	if n == nil {
		return out
	}
	ast.Inspect(n, func(x ast.Node) bool {
		if c, ok := x.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "WithDefaults" {
				out = append(out, c.Pos())
			}
			if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "withDefaults" { // the workflows' one call (lease/intake.go)
				out = append(out, c.Pos())
			}
		}
		return true
	})
	return out
}

// readWalk parses the walk table of docs/architecture.md.
func readWalk(t *testing.T) []walkStep {
	t.Helper()
	f, err := os.Open("docs/architecture.md")
	require.NoError(t, err)
	defer f.Close()
	code := regexp.MustCompile("`([^`]+)`")
	var steps []walkStep
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "<!-- walk"):
			in = true
			continue
		case strings.HasPrefix(line, "<!-- /walk"):
			in = false
		}
		if !in || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| step") || strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		require.Len(t, cells, 5, "walk row %q", line)
		n, err := strconv.Atoi(cells[0])
		require.NoError(t, err, "walk row %q", line)
		s := walkStep{step: n, defaults: strings.Contains(cells[4], "**its defaults are filled, once**")}
		file, entry := code.FindStringSubmatch(cells[1]), code.FindStringSubmatch(cells[2])
		require.NotNil(t, file, "walk row %q: file", line)
		require.NotNil(t, entry, "walk row %q: entry", line)
		s.file, s.entry = file[1], entry[1]
		if from := cells[3]; from != "Temporal" {
			num, via, _ := strings.Cut(from, ", ")
			s.from, err = strconv.Atoi(num)
			require.NoError(t, err, "walk row %q: from", line)
			if m := code.FindStringSubmatch(via); m != nil {
				s.via = m[1]
			}
		}
		steps = append(steps, s)
	}
	return steps
}
