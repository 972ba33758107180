package workflows_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/testenv"
	"github.com/deployflow/deployflow/workflows"
)

func (dt *deployTest) temporalCLI(args ...string) string {
	dt.t.Helper()
	out, err := exec.Command(dt.env.Stack.Bin(devstack.Temporal), append(args, "--address", devstack.TemporalAddress)...).CombinedOutput()
	require.NoError(dt.t, err, "temporal %v: %s", args, out)
	return string(out)
}

// The README's `temporal workflow start` with plain JSON input deploys a
// lease, and a failed deploy is found with a search-attribute query.
func TestDeployStartedWithTheTemporalCLIAndFoundBySearchAttributes(t *testing.T) {
	dt := newDeployTest(t)
	input := `{"manifest": {"lease": "` + dt.lease + `", "services": [{"name": "web", "image": "nginx:1.27", "replicas": 2,
	  "ports": [{"port": 80, "expose": {"http": {"hostnames": ["` + dt.lease + `.apps.example.com"]}}}]}]}, "trigger": "cli"}`
	out := dt.temporalCLI("workflow", "start", "--type", "DeployWorkflow", "--task-queue", dt.tq,
		"--workflow-id", workflows.DeployWorkflowID(dt.lease), "--input", input)
	assert.Contains(t, out, "Running execution")
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, workflows.PhaseActive, st.Phase, st.LastError)

	// Another owner's lease asks for the same hostname: its deploy fails.
	other := testenv.ShortName("lease")
	dt.createLease(other, "globex")
	dt.temporalCLI("workflow", "start", "--type", "DeployWorkflow", "--task-queue", dt.tq,
		"--workflow-id", workflows.DeployWorkflowID(other), "--input", strings.ReplaceAll(input, `"lease": "`+dt.lease+`"`, `"lease": "`+other+`"`))
	require.Equal(t, workflows.PhaseFailed, dt.waitRevision(other, 1).Phase)

	query := `DeployflowLease="` + other + `" AND DeployflowPhase="Failed"`
	var found []map[string]any
	require.Eventually(t, func() bool {
		out := dt.temporalCLI("workflow", "list", "--query", query, "-o", "json")
		found = nil
		return json.Unmarshal([]byte(out), &found) == nil && len(found) > 0
	}, 30*time.Second, 250*time.Millisecond, "temporal workflow list --query '%s' found nothing", query)
	b, _ := json.Marshal(found[0])
	assert.Contains(t, string(b), workflows.DeployWorkflowID(other))
	active := dt.temporalCLI("workflow", "list", "--query", `DeployflowLease="`+dt.lease+`" AND DeployflowPhase="Active"`)
	assert.Contains(t, active, workflows.DeployWorkflowID(dt.lease))
}

// The README's `temporal workflow start --type RolloutWorkflow` rolls one
// service out in a namespace the worker may act in (here a managed one; the
// README's `shop` is listed with --rollout-namespaces).
func TestRolloutStartedWithTheTemporalCLI(t *testing.T) {
	dt := newDeployTest(t)
	ns := dt.env.Namespace(t)
	id := workflows.RolloutWorkflowID(ns, "web")
	dt.temporalCLI("workflow", "start", "--type", "RolloutWorkflow", "--task-queue", dt.tq, "--workflow-id", id,
		"--input", `{"namespace":"`+ns+`","service":"web","deployment":{"spec":{"replicas":3,
    "template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}}`)
	var res workflows.RolloutResult
	require.NoError(t, dt.env.Temporal.GetWorkflow(context.Background(), id, "").Get(context.Background(), &res))
	assert.Equal(t, workflows.OutcomeComplete, res.Outcome)
	assert.Equal(t, int32(3), res.AvailableReplicas)
}
