package deployflow_test

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/deployflow/deployflow"

// Issue 21.4: arrows point down. Every package of the module belongs to a
// layer of the table in docs/architecture.md, and imports (directly or not)
// only packages of its own layer or below. Before, internal/app (the
// wiring) and the observer's Temporal sender imported workflows, and the
// observer's pure Observation type lived in activities.
func TestImportsPointDown(t *testing.T) {
	layers := readLayers(t)
	layerOf := func(pkg string) (int, bool) {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		best, found := 0, false
		for pattern, n := range layers {
			base, tree := strings.CutSuffix(pattern, "/...")
			if rel == base || (tree && strings.HasPrefix(rel, base+"/")) {
				best, found = n, true
			}
		}
		return best, found
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...").Output()
	require.NoError(t, err, "go list")
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := fields[0]
		n, ok := layerOf(pkg)
		if !ok {
			t.Errorf("%s is in no layer: add it to the layer table of docs/architecture.md", pkg)
			continue
		}
		checked++
		for _, dep := range fields[1:] {
			if dep != module && !strings.HasPrefix(dep, module+"/") {
				continue
			}
			if m, ok := layerOf(dep); ok && m > n {
				t.Errorf("%s (layer %d) imports %s (layer %d): arrows point down", pkg, n, dep, m)
			}
		}
	}
	require.Greater(t, checked, 20, "the module's packages were listed")
}

// readLayers parses the layer table of docs/architecture.md: package
// pattern → layer.
func readLayers(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open("docs/architecture.md")
	require.NoError(t, err)
	defer f.Close()
	row := regexp.MustCompile("^\\| (\\d+) \\| (.*?) \\|")
	code := regexp.MustCompile("`([^`]+)`")
	layers := map[string]int{}
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "<!-- layers"):
			in = true
		case strings.HasPrefix(line, "<!-- /layers"):
			in = false
		case in:
			m := row.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			for _, c := range code.FindAllStringSubmatch(m[2], -1) {
				layers[c[1]] = n
			}
			if strings.Contains(m[2], "the module root") {
				layers[""] = n
			}
		}
	}
	require.NotEmpty(t, layers, "docs/architecture.md has no layer table between <!-- layers --> markers")
	return layers
}

// Issue 36.2: the workflows' contract is package api. Outside workflows/,
// only the worker's wiring (worker/app, which registers the workflows)
// imports their implementation: the CLI, the bench, the placement's
// activities and every test import the contract. Before, all of them
// imported workflows, and activities/fleet's import ran back up a layer.
func TestOnlyTheWiringImportsTheWorkflows(t *testing.T) {
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...").Output()
	require.NoError(t, err, "go list")
	contract := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		for _, dep := range fields[1:] {
			switch dep {
			case module + "/workflows", module + "/workflows/lease", module + "/workflows/rollout", module + "/workflows/placement":
				if !strings.HasPrefix(pkg, "workflows") && pkg != "worker/app" {
					t.Errorf("%s imports %s: import the contract, %s/api, instead", fields[0], dep, module)
				}
			case module + "/api":
				contract[pkg] = true
			}
		}
	}
	for _, pkg := range []string{"starter", "hack/bench", "activities/fleet", "worker/app", "workflows/lease", "workflows/rollout", "workflows/placement"} {
		assert.True(t, contract[pkg], "%s imports the contract", pkg)
	}
}

// Issue 36.5: one package per workflow, as upstream has one per
// controller, and none imports another's implementation: a lease starts
// its rollouts by their name in the contract, and what they share is
// workflows/internal/flow. Before, the lease, the rollout and the placement
// were one package, and each file reached into the others' (the placement
// into the lease's error text and the rollout's Job names, the rollout
// into the lease's carry codec). A package's own tests may run another
// workflow (a lease's child rollouts); its code may not import it.
func TestNoWorkflowImportsAnothers(t *testing.T) {
	workflows := []string{"workflows/lease", "workflows/rollout", "workflows/stateful", "workflows/placement"}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./workflows/...").Output()
	require.NoError(t, err, "go list")
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		if !slices.Contains(workflows, pkg) {
			continue
		}
		seen++
		for _, dep := range fields[1:] {
			other := strings.TrimPrefix(dep, module+"/")
			if other != pkg && (slices.Contains(workflows, other) || other == "workflows") {
				t.Errorf("%s imports %s: start it by its name in package api, and share code through workflows/internal/flow", pkg, other)
			}
		}
	}
	require.Equal(t, len(workflows), seen, "every workflow's package was listed")
}
