package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/deployflow/deployflow/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
)

// `deploy --plan` prints the plan and changes nothing; `--plan --yes`
// deploys it, approving it when the manifest requires approval.
func TestDeployPlanPrintsThePlanAndYesDeploysIt(t *testing.T) {
	env, tq, lease := newLease(t, "plan")
	file := filepath.Join(t.TempDir(), "m.yaml")
	require.NoError(t, os.WriteFile(file, []byte("lease: "+lease+"\nrequireApproval: true\nservices:\n  - name: web\n    image: nginx:1.27\n    replicas: 2\n"+
		"    ports: [{port: 80, expose: {http: {hostnames: ["+lease+".plan.example.com]}}}]\n"), 0o644))
	cli(t, env, tq, "lease", "create", lease, "--owner", "acme")

	out, _ := cli(t, env, tq, "deploy", "-f", file, "--plan")
	assert.Contains(t, out, "plan for lease "+lease+" (owner acme):")
	assert.Contains(t, out, "web          rollout  (none) → nginx:1.27")
	assert.Contains(t, out, "│  ├─ reserve hostname "+lease+".plan.example.com")
	assert.Contains(t, out, "├─ roll out web: nginx:1.27, 2 replicas")
	assert.Contains(t, out, "summary: 1 services (1 rollout); hostnames: 1 to reserve, 0 to release")
	_, err := env.Temporal.DescribeWorkflowExecution(context.Background(), api.DeployWorkflowID(lease), "")
	var notFound *serviceerror.NotFound
	assert.ErrorAs(t, err, &notFound, "--plan alone starts nothing")

	out, _ = cli(t, env, tq, "deploy", "-f", file, "--plan", "--yes", "--wait")
	assert.Contains(t, out, "lease "+lease+" (owner acme): Active, deploy #1")
}

// `deploy --plan` prints the tree the lease's workflow then executes:
// `history` shows the same nodes, in the same order, each done. An
// ordinary deploy first (IPs, a hostname, objects, a rollout), then a
// canary (its steps under its rollout) that swaps the hostname.
func TestThePrintedPlanIsTheExecutedTree(t *testing.T) {
	env, tq, lease := newLease(t, "tree")
	dir := t.TempDir()
	write := func(name, image, host, rollout string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("lease: "+lease+"\nservices:\n  - name: web\n    image: "+image+"\n    replicas: 4\n"+
			"    ports: [{port: 80, expose: {http: {hostnames: ["+host+"]}}}]\n"+rollout), 0o644))
		return p
	}
	cli(t, env, tq, "lease", "create", lease, "--owner", "acme")
	canary := "    rollout:\n      strategy: Canary\n      steps:\n        - setWeight: 50\n        - pause: {duration: 1s}\n"
	deploys := []struct {
		file  string
		nodes int
	}{
		{write("v1.yaml", "nginx:1.26", lease+".one.example.com", ""), 8},
		{write("v2.yaml", "nginx:1.27", lease+".two.example.com", canary), 10},
	}
	for i, d := range deploys {
		out, _ := cli(t, env, tq, "deploy", "-f", d.file, "--plan", "--yes", "--wait")
		t.Logf("deploy #%d, --plan --yes --wait printed:\n%s", i+1, out)
		printed := treeLines(t, out, "the deploy, as the lease's workflow will execute it:", "summary:")
		require.Len(t, printed, d.nodes, "deploy #%d's printed plan:\n%s", i+1, out)

		hist, _ := cli(t, env, tq, "history", lease)
		executed := treeLines(t, hist, fmt.Sprintf("deploy #%d, as executed:", i+1), "")
		require.Len(t, executed, len(printed), "deploy #%d: the executed tree has the printed tree's nodes\nprinted:\n%s\nhistory:\n%s", i+1, out, hist)
		for n, line := range executed {
			text, state := splitState(line)
			assert.Equal(t, printed[n], text, "deploy #%d, node %d", i+1, n+1)
			assert.Equal(t, "done", state, "deploy #%d, node %d (%s)", i+1, n+1, text)
		}
	}
	out, _ := cli(t, env, tq, "history", lease)
	t.Logf("history printed:\n%s", out)
	assert.Contains(t, out, "│  ├─ step 1/2: setWeight 50%")
	assert.Contains(t, out, "├─ reserve hostname "+lease+".two.example.com")
	assert.Contains(t, out, "└─ release hostname "+lease+".one.example.com")
}

// treeLines are the lines of out after the line from up to the line that
// starts with to (or an empty line).
func treeLines(t *testing.T, out, from, to string) []string {
	t.Helper()
	var lines []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == from:
			in = true
		case in && (l == "" || to != "" && strings.HasPrefix(l, to)):
			return lines
		case in:
			lines = append(lines, l)
		}
	}
	require.True(t, in, "no %q in:\n%s", from, out)
	return lines
}

// splitState splits an executed tree's line into the node and its state
// (the last column, two spaces or more after the node).
func splitState(line string) (text, state string) {
	m := regexp.MustCompile(`^(.*?)\s{2,}(pending|running|done|failed|skipped)(: .*)?$`).FindStringSubmatch(line)
	if m == nil {
		return line, ""
	}
	return m[1], m[2]
}
