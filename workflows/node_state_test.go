package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 36.1: one function in the workflows says how far a plan node got.
// Before, the deploy's tree was marked in four files (a rollout's node
// twice over: done, then failed when undone), the placement's in two,
// and the tree's own state was assigned directly. A Mark, a MarkAll or an
// assignment to a node's State anywhere but in setState fails here.
func TestOneFunctionSetsNodeStates(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				var sel *ast.SelectorExpr
				switch n := n.(type) {
				case *ast.CallExpr:
					if s, ok := n.Fun.(*ast.SelectorExpr); ok && (s.Sel.Name == "Mark" || s.Sel.Name == "MarkAll") {
						sel = s
					}
				case *ast.AssignStmt:
					for _, l := range n.Lhs {
						if s, ok := l.(*ast.SelectorExpr); ok && s.Sel.Name == "State" {
							sel = s
						}
					}
				}
				if sel == nil {
					return true
				}
				checked++
				assert.Equal(t, "setState", fn.Name.Name, "%s: %s sets a node's state (%s): call setState",
					fset.Position(sel.Pos()), fn.Name.Name, sel.Sel.Name)
				return true
			})
		}
	}
	assert.Equal(t, 1, checked, "the one Mark is setState's")
}
