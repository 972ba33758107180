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

// workflowDirs are the workflows' packages, as paths from this one.
var workflowDirs = []string{"internal/flow", "lease", "placement", "rollout"}

// parseWorkflows parses the workflows' own files (tests excluded), each
// under its path from this package (e.g. "internal/flow/gates.go").
func parseWorkflows(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, dir := range workflowDirs {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		require.NotEmpty(t, names, dir)
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			require.NoError(t, err)
			files[filepath.ToSlash(name)] = f
		}
	}
	return fset, files
}

// inspectFuncs calls visit with every node in the body of every function
// of the workflows' own files (tests excluded), for the tests that check
// where the code does a thing: a node's state, a manifest's defaults.
func inspectFuncs(t *testing.T, visit func(fset *token.FileSet, fn *ast.FuncDecl, n ast.Node)) {
	t.Helper()
	fset, files := parseWorkflows(t)
	for _, f := range files {
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
