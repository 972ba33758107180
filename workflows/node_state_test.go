package workflows

import (
	"go/ast"
	"go/token"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Issue 36.1: one function in the workflows says how far a plan node got.
// Before, the deploy's tree was marked in four files (a rollout's node
// twice over: done, then failed when undone), the placement's in two,
// and the tree's own state was assigned directly. A Mark, a MarkAll or an
// assignment to a node's State anywhere but in flow.SetState fails here.
func TestOneFunctionSetsNodeStates(t *testing.T) {
	checked := 0
	inspectFuncs(t, func(fset *token.FileSet, fn *ast.FuncDecl, n ast.Node) {
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
			return
		}
		checked++
		assert.Equal(t, "SetState", fn.Name.Name, "%s: %s sets a node's state (%s): call flow.SetState",
			fset.Position(sel.Pos()), fn.Name.Name, sel.Sel.Name)
	})
	assert.Equal(t, 1, checked, "the one Mark is SetState's")
}
