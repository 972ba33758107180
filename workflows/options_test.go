package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 36.5: every call's options (activity, local activity, child
// workflow: timeouts and retries) live in options.go, so that how long a
// step may take and how it is retried is read in one file. Before, they
// were set in 7 files, and a rollout's and a placement wave's measurement
// each had a copy of the same options.
func TestCallOptionsLiveInOneFile(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	setters := map[string]bool{"WithActivityOptions": true, "WithLocalActivityOptions": true, "WithChildOptions": true,
		"ActivityOptions": true, "LocalActivityOptions": true, "ChildWorkflowOptions": true}
	var elsewhere []string
	for _, file := range pkgs["workflows"].Files {
		name := filepath.Base(fset.Position(file.Pos()).Filename)
		if name == "options.go" {
			continue
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "workflow" && setters[sel.Sel.Name] {
					elsewhere = append(elsewhere, fset.Position(sel.Pos()).String()+": workflow."+sel.Sel.Name)
				}
			}
			return true
		})
	}
	assert.Empty(t, elsewhere, "call options set outside options.go: add a named function there")
}
