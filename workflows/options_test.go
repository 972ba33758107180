package workflows

import (
	"go/ast"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Issue 36.5: every call's options (activity, local activity, child
// workflow: timeouts and retries) live in internal/flow/options.go, so that how long a
// step may take and how it is retried is read in one file. Before, they
// were set in 7 files, and a rollout's and a placement wave's measurement
// each had a copy of the same options.
func TestCallOptionsLiveInOneFile(t *testing.T) {
	fset, files := parseWorkflows(t)
	setters := map[string]bool{"WithActivityOptions": true, "WithLocalActivityOptions": true, "WithChildOptions": true,
		"ActivityOptions": true, "LocalActivityOptions": true, "ChildWorkflowOptions": true}
	var elsewhere []string
	for name, file := range files {
		if name == "internal/flow/options.go" {
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
	assert.Empty(t, elsewhere, "call options set outside internal/flow/options.go: add a named function there")
}
