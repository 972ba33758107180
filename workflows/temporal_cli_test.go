package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/worker/testenv"
)

func (dt *deployTest) temporalCLI(args ...string) string {
	dt.t.Helper()
	out, err := exec.Command(dt.env.Stack.Bin(devstack.Temporal), append(args, "--address", devstack.TemporalAddress)...).CombinedOutput()
	require.NoError(dt.t, err, "temporal %v: %s", args, out)
	return string(out)
}

// The `temporal workflow start` of docs/cli.md, with plain JSON input,
// deploys a lease, and a failed deploy is found with a search-attribute
// query.
func TestDeployStartedWithTheTemporalCLIAndFoundBySearchAttributes(t *testing.T) {
	dt := newDeployTest(t)
	input := `{"manifest": {"lease": "` + dt.lease + `", "services": [{"name": "web", "image": "nginx:1.27", "replicas": 2,
	  "ports": [{"port": 80, "expose": {"http": {"hostnames": ["` + dt.lease + `.apps.example.com"]}}}]}]}, "trigger": "cli"}`
	out := dt.temporalCLI("workflow", "start", "--type", "DeployWorkflow", "--task-queue", dt.tq,
		"--workflow-id", api.DeployWorkflowID(dt.lease), "--input", input)
	assert.Contains(t, out, "Running execution")
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)

	// Another owner's lease asks for the same hostname: its deploy fails.
	other := testenv.ShortName("lease")
	dt.createLease(other, "globex")
	dt.temporalCLI("workflow", "start", "--type", "DeployWorkflow", "--task-queue", dt.tq,
		"--workflow-id", api.DeployWorkflowID(other), "--input", strings.ReplaceAll(input, `"lease": "`+dt.lease+`"`, `"lease": "`+other+`"`))
	require.Equal(t, api.PhaseFailed, dt.waitRevision(other, 1).Phase)

	query := `DeployflowLease="` + other + `" AND DeployflowPhase="Failed"`
	var found []map[string]any
	require.Eventually(t, func() bool {
		out := dt.temporalCLI("workflow", "list", "--query", query, "-o", "json")
		found = nil
		return json.Unmarshal([]byte(out), &found) == nil && len(found) > 0
	}, 2*time.Minute, 250*time.Millisecond, "temporal workflow list --query '%s' found nothing", query)
	b, _ := json.Marshal(found[0])
	assert.Contains(t, string(b), api.DeployWorkflowID(other))
	active := dt.temporalCLI("workflow", "list", "--query", `DeployflowLease="`+dt.lease+`" AND DeployflowPhase="Active"`)
	assert.Contains(t, active, api.DeployWorkflowID(dt.lease))
}

// The `temporal workflow start --type RolloutWorkflow` of docs/deploying.md
// rolls one service out in a namespace the worker may act in (here a
// managed one; the page's `shop` is listed with --rollout-namespaces).
func TestRolloutStartedWithTheTemporalCLI(t *testing.T) {
	dt := newDeployTest(t)
	ns := dt.env.Namespace(t)
	id := api.RolloutWorkflowID(ns, "web")
	dt.temporalCLI("workflow", "start", "--type", "RolloutWorkflow", "--task-queue", dt.tq, "--workflow-id", id,
		"--input", `{"namespace":"`+ns+`","service":"web","deployment":{"spec":{"replicas":3,
    "template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}}`)
	var res api.RolloutResult
	require.NoError(t, dt.env.Temporal.GetWorkflow(context.Background(), id, "").Get(context.Background(), &res))
	assert.Equal(t, api.OutcomeComplete, res.Outcome)
	assert.Equal(t, int32(3), res.AvailableReplicas)
}

// Issue 13.4: malformed inputs typed into the `temporal` CLI (or the UI's
// JSON box) end the workflow at once with a typed failure naming the field;
// none leaves a workflow task failing in a loop. Before, an unknown field
// was dropped (a misspelt "replica": 3 deployed one replica) and a wrong
// type failed the workflow with a Go type name.
func TestMalformedInputsFromTheTemporalCLIFailTypedNamingTheField(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	svc := func(extra string) string {
		return `{"manifest": {"lease": "` + dt.lease + `", "services": [{"name": "web", "image": "nginx:1.27"` + extra + `}]}}`
	}
	for i, c := range []struct {
		workflowType, input, typ, want string
	}{
		{"DeployWorkflow", svc(`, "replica": 3`), api.ErrInvalidManifest, "manifest.services[0].replica: unknown field; did you mean replicas?"},
		{"DeployWorkflow", svc(`, "replicas": "three"`), api.ErrInvalidManifest, `manifest.services[0].replicas: want a whole number, got the string "three"`},
		{"DeployWorkflow", svc(`, "replicas": 1e12`), api.ErrInvalidManifest, "manifest.services[0].replicas: want a whole number, got the number 1e12"},
		{"DeployWorkflow", svc(`, "replicas": 100000`), api.ErrInvalidManifest, "manifest.services[0].replicas: 100000 is too many"},
		{"DeployWorkflow", svc(`, "podAnnotations": {"huge": "` + strings.Repeat("x", 300<<10) + `"}`), api.ErrInvalidManifest, "manifest: the manifest is 307313 bytes, more than the 262144 allowed"},
		{"DeployWorkflow", `{"manifest": {"services": []}}`, api.ErrInvalidManifest, "lease"},
		{"DeployWorkflow", `{"manifset": {}}`, api.ErrInvalidInput, "manifset: unknown field; did you mean manifest?"},
		{"DeployWorkflow", `"` + dt.lease + `"`, api.ErrInvalidInput, "the input must be a JSON object"},
		{"RolloutWorkflow", `{"namespace": "shop", "service": "web", "deployment": {"spec": {"replicas": "3"}}}`, api.ErrInvalidInput, "deployment.spec.replicas: want int32, got string"},
		{"RolloutWorkflow", `{"namespace": "shop", "servce": "web"}`, api.ErrInvalidInput, "servce: unknown field; did you mean service?"},
	} {
		id := fmt.Sprintf("%s-malformed-%d", api.DeployWorkflowID(dt.lease), i)
		file := filepath.Join(t.TempDir(), "input.json") // --input-file: a 300 KB argument is too long for exec
		require.NoError(t, os.WriteFile(file, []byte(c.input), 0o600))
		dt.temporalCLI("workflow", "start", "--type", c.workflowType, "--task-queue", dt.tq, "--workflow-id", id, "--input-file", file)
		err := dt.env.Temporal.GetWorkflow(ctx, id, "").Get(ctx, nil)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr, "%s %s", c.workflowType, c.want)
		assert.Equal(t, c.typ, appErr.Type(), appErr.Error())
		assert.True(t, appErr.NonRetryable())
		assert.Contains(t, appErr.Error(), c.want)
		it := dt.env.Temporal.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			assert.NotEqual(t, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, ev.GetEventType(), "%s: a workflow task failed: %v", c.want, ev)
		}
	}

	// A running lease: a deploy update with a bad manifest is refused by the
	// validator, naming the field; the lease goes on as it was.
	dt.temporalCLI("workflow", "start", "--type", "DeployWorkflow", "--task-queue", dt.tq,
		"--workflow-id", api.DeployWorkflowID(dt.lease), "--input", svc(`, "replicas": 1`))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase)
	for input, want := range map[string]string{
		svc(`, "replica": 3`):        "manifest.services[0].replica: unknown field; did you mean replicas?",
		svc(`, "replicas": "3"`):     "manifest.services[0].replicas: want a whole number, got the string",
		`{"manifest": {"lease": 1}}`: "manifest.lease: want a string",
	} {
		out, err := exec.Command(dt.env.Stack.Bin(devstack.Temporal), "workflow", "update", "execute", "--address", devstack.TemporalAddress,
			"--workflow-id", api.DeployWorkflowID(dt.lease), "--name", api.UpdateDeploy, "--input", input).CombinedOutput()
		require.Error(t, err, "the update was accepted: %s", out)
		assert.Contains(t, string(out), want)
	}
	// An operator's scale with a misspelt field is refused, naming it (it
	// scaled web to 0 before).
	out, err := exec.Command(dt.env.Stack.Bin(devstack.Temporal), "workflow", "update", "execute", "--address", devstack.TemporalAddress,
		"--workflow-id", api.DeployWorkflowID(dt.lease), "--name", api.UpdateScale, "--input", `{"service": "web", "replica": 0}`).CombinedOutput()
	require.Error(t, err, "the scale was accepted: %s", out)
	assert.Contains(t, string(out), "replica: unknown field; did you mean replicas?")

	// A redeploy signal with a payload of the wrong type, or an unknown
	// action, changes nothing (a signal has no answer: the worker logs it).
	dt.temporalCLI("workflow", "signal", "--workflow-id", api.DeployWorkflowID(dt.lease), "--name", api.SignalRedeploy, "--input", `"restart"`)
	dt.temporalCLI("workflow", "signal", "--workflow-id", api.DeployWorkflowID(dt.lease), "--name", api.SignalRedeploy, "--input", `{"action": "restrat"}`)
	time.Sleep(2 * time.Second)
	st, err := dt.status(dt.lease)
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Revision, "a bad signal deployed again")
	assert.Equal(t, api.PhaseActive, st.Phase)
	it := dt.env.Temporal.GetWorkflowHistory(ctx, api.DeployWorkflowID(dt.lease), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if ev.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
			continue
		}
		// The SDK fails a task whose history it read short (the server
		// under the load of the suite beside it answered before it had the
		// task's last events); the retried task goes on. That is not the
		// signals' doing.
		if msg := ev.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage(); strings.Contains(msg, "premature end of stream") {
			t.Logf("a workflow task read its history short and was retried: %s", msg)
			continue
		}
		t.Errorf("a workflow task failed: %v", ev)
	}
}

// The gate-retirement check of docs/upgrading.md ("When a gate may go"):
// `temporal workflow count` of the running executions started before T
// counts a lease's run until a deploy continues it as new, and then no more
// (a continued run asks its gates afresh). The carried-gate check runs too.
func TestTheGateRetirementCheckCountsALeaseUntilItContinuesAsNew(t *testing.T) {
	dt := newDeployTest(t)
	host := dt.lease + ".retire.example.com"
	dt.deploy(twoServices(dt.lease, host, "nginx:1.26", nil, false))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase)
	time.Sleep(time.Second) // T strictly after the idle run's start
	T := time.Now().UTC().Format(time.RFC3339Nano)
	query := `ExecutionStatus="Running" AND StartTime < "` + T + `" AND DeployflowLease="` + dt.lease + `"`
	count := func() string { return strings.TrimSpace(dt.temporalCLI("workflow", "count", "--query", query)) }
	require.Eventually(t, func() bool { return count() == "Total: 1" }, 2*time.Minute, 250*time.Millisecond,
		"the lease's run started before T is not counted: %s", count())

	dt.deploy(twoServices(dt.lease, host, "nginx:1.27", nil, false))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 2).Phase)
	require.Eventually(t, func() bool { return count() == "Total: 0" }, 2*time.Minute, 250*time.Millisecond,
		"the lease continued as new after T and is still counted: %s", count())

	rollouts := dt.temporalCLI("workflow", "count", "--query", `WorkflowType="RolloutWorkflow" AND ExecutionStatus="Running"`)
	assert.Regexp(t, `^Total: \d+\s*$`, rollouts)
}
