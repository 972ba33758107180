package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/deployflow/deployflow/workflows"
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
	assert.Contains(t, out, "1. reserve hostname "+lease+".plan.example.com")
	assert.Contains(t, out, "roll out web: nginx:1.27, 2 replicas")
	assert.Contains(t, out, "summary: 1 services (1 rollout); hostnames: 1 to reserve, 0 to release")
	_, err := env.Temporal.DescribeWorkflowExecution(context.Background(), workflows.DeployWorkflowID(lease), "")
	var notFound *serviceerror.NotFound
	assert.ErrorAs(t, err, &notFound, "--plan alone starts nothing")

	out, _ = cli(t, env, tq, "deploy", "-f", file, "--plan", "--yes", "--wait")
	assert.Contains(t, out, "lease "+lease+" (owner acme): Active, deploy #1")
}
