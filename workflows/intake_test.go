package workflows

import (
	"go/ast"
	"go/token"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Issue 36.3: a manifest's defaults are filled where it enters a workflow
// (lease/intake.go: a lease's start and deploy update, a continued run's carry;
// a plan's request), and nowhere after. Before, 8 sites in the workflows
// filled them (the chain, health, scale, restart and reapply, every
// comparison of two manifests), so which manifest had its defaults was
// anyone's guess. A WithDefaults anywhere but in withDefaults, or a call
// of withDefaults from any other function, fails here.
func TestDefaultsAreFilledWhereAManifestEnters(t *testing.T) {
	entries := map[string]int{"taken": 0, "takeCarried": 0, "PlanWorkflow": 0, "returnsToLastGood": 0, "storageFollows": 0}
	inspectFuncs(t, func(fset *token.FileSet, fn *ast.FuncDecl, n ast.Node) {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return
		}
		switch f := c.Fun.(type) {
		case *ast.SelectorExpr:
			if f.Sel.Name == "WithDefaults" {
				assert.Equal(t, "withDefaults", fn.Name.Name, "%s: %s fills a manifest's defaults: only withDefaults does (lease/intake.go)", fset.Position(c.Pos()), fn.Name.Name)
			}
		case *ast.Ident:
			if f.Name == "withDefaults" {
				_, entry := entries[fn.Name.Name]
				assert.True(t, entry, "%s: %s fills a manifest's defaults: a manifest has them from where it entered (taken, takeCarried, PlanWorkflow, returnsToLastGood, storageFollows)", fset.Position(c.Pos()), fn.Name.Name)
				entries[fn.Name.Name]++
			}
		}
	})
	for entry, n := range entries {
		assert.Equal(t, 1, n, "%s fills the defaults of what enters, once", entry)
	}
}
