package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// inspectFuncs calls visit with every node in the body of every function
// of the package's own files (tests excluded), for the tests that check
// where the code does a thing: a node's state, a manifest's defaults.
func inspectFuncs(t *testing.T, visit func(fset *token.FileSet, fn *ast.FuncDecl, n ast.Node)) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if n != nil {
						visit(fset, fn, n)
					}
					return true
				})
			}
		}
	}
}
