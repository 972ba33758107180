package main

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/worker/testenv"
)

// newLease is a lease for a CLI test: the local stack, a worker on a task
// queue of its own, and a lease ID whose workflow and namespace are removed
// when the test ends.
func newLease(t *testing.T, prefix string) (env *testenv.Env, tq, lease string) {
	env = testenv.Get(t)
	tq = env.Worker(t)
	lease = testenv.ShortName(prefix)
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Temporal.TerminateWorkflow(ctx, api.DeployWorkflowID(lease), "", "test over")
		_ = env.Kube.CoreV1().Namespaces().Delete(ctx, manifest.Namespace(lease), metav1.DeleteOptions{})
		_ = env.Dynamic.Resource(crds.Leases).Delete(ctx, lease, metav1.DeleteOptions{})
	})
	return env, tq, lease
}

// cli runs the deployflow CLI against the local stack and a test's worker.
func cli(t *testing.T, env *testenv.Env, tq string, args ...string) (string, string) {
	t.Helper()
	args = append(args, "--temporal-address", devstack.TemporalAddress, "--task-queue", tq, "--kubeconfig", env.Stack.Kubeconfig())
	code, stdout, stderr := runCLI(args...)
	require.Equal(t, 0, code, "deployflow %v\nstdout: %s\nstderr: %s", args, stdout, stderr)
	return stdout, stderr
}

// leaseStatus is `deployflow status <lease> -o json`, decoded.
func leaseStatus(t *testing.T, env *testenv.Env, tq, lease string) api.DeployStatus {
	t.Helper()
	st, unanswered := tryLeaseStatus(t, env, tq, lease)
	require.Empty(t, unanswered, "status of lease %s", lease)
	return st
}

// tryLeaseStatus is leaseStatus, or why not if the CLI gave up on a
// status Temporal did not answer: a query that timed out, or a workflow
// whose task failed (it answers again once a task succeeds). Any other
// failure fails the test.
func tryLeaseStatus(t *testing.T, env *testenv.Env, tq, lease string) (st api.DeployStatus, unanswered string) {
	t.Helper()
	args := []string{"status", lease, "-o", "json", "--temporal-address", devstack.TemporalAddress, "--task-queue", tq, "--kubeconfig", env.Stack.Kubeconfig()}
	code, out, stderr := runCLI(args...)
	if code != 0 && (strings.Contains(stderr, "query timed out") || strings.Contains(stderr, "Workflow Task in failed state")) {
		return st, lastLine(stderr)
	}
	require.Equal(t, 0, code, "deployflow %v\nstdout: %s\nstderr: %s", args, out, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	return st, ""
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// waitLease asks the lease's status until cond holds, within three
// minutes, as every live wait here. Asked in the test's goroutine
// (testenv.Eventually): require's Eventually asked from one of its own,
// and a status slower than its minute (CI run 39, on the PostgreSQL
// server) failed the test from that goroutine after the test had ended,
// crashing the package's test binary.
//
// A status the CLI gave up on (Temporal did not answer its query within
// its minute: CI run 60, a loaded machine; or refused it for a minute
// while the lease's workflow task failed: CI stop 48, the PostgreSQL
// server on a loaded machine) is asked again within the three minutes: it
// says nothing of the lease's state, and the CLI's last word on it (what
// the task's failure was) ends the message if it never answers; any
// other failure fails the test.
func waitLease(t *testing.T, env *testenv.Env, tq, lease, what string, cond func(api.DeployStatus) bool) api.DeployStatus {
	t.Helper()
	var st api.DeployStatus
	testenv.Eventually(t, 3*time.Minute, 200*time.Millisecond, "never "+what, func() (bool, string) {
		var unanswered string
		if st, unanswered = tryLeaseStatus(t, env, tq, lease); unanswered != "" {
			return false, "status not answered: " + unanswered
		}
		return cond(st), fmt.Sprintf("revision %d, %s, pending %v, classes %v", st.Revision, st.Phase, st.Pending, st.Classes)
	})
	return st
}

// A deploy from the CLI, then a schedule whose run is triggered with
// `temporal schedule trigger`: it restarts the lease's pods through the
// lease's own workflow (deploy-<lease>), recorded with trigger "schedule".
func TestScheduledRestartGoesThroughTheLeaseWorkflow(t *testing.T) {
	env, tq, lease := newLease(t, "sched")
	file := filepath.Join(t.TempDir(), "m.yaml")
	require.NoError(t, os.WriteFile(file, []byte("lease: "+lease+"\nservices:\n  - name: web\n    image: nginx:1.27\n    replicas: 2\n"), 0o644))

	cli(t, env, tq, "lease", "create", lease, "--owner", "acme")
	out, _ := cli(t, env, tq, "deploy", "-f", file, "--wait")
	assert.Contains(t, out, "lease "+lease+" (owner acme): Active, deploy #1")

	// A second CLI deploy of the same lease updates the running workflow.
	out, _ = cli(t, env, tq, "deploy", "-f", file, "--wait")
	assert.Contains(t, out, "Active, deploy #2")
	assert.Contains(t, out, "web      no-op")

	id := ScheduleID(lease, api.RedeployRestart)
	out, _ = cli(t, env, tq, "schedule", "create", lease, "--every", "24h", "--action", "restart")
	assert.Contains(t, out, "schedule "+id+" created")
	t.Cleanup(func() { runCLI("schedule", "delete", id, "--temporal-address", devstack.TemporalAddress) })

	// Once seen (CI run 19, 2 cores under every live test): the trigger
	// accepted, and after 3 min the lease still at revision 2. If it fails
	// again, what the schedule did and which runs it started say where it
	// stopped: the server's scheduler, the schedule's run or the lease.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		temporal := env.Stack.Bin(devstack.Temporal)
		desc, _ := exec.Command(temporal, "schedule", "describe", "--address", devstack.TemporalAddress, "--schedule-id", id).CombinedOutput()
		runs, _ := exec.Command(temporal, "workflow", "list", "--address", devstack.TemporalAddress,
			"--query", `TaskQueue="`+tq+`"`).CombinedOutput()
		t.Logf("schedule %s:\n%s\nworkflows on %s:\n%s", id, desc, tq, runs)
		// Each run of the lease's workflow, event by event: where the
		// schedule's signal landed, and what the run did with it.
		ids, _ := exec.Command(temporal, "workflow", "list", "--address", devstack.TemporalAddress,
			"--query", `WorkflowId="`+api.DeployWorkflowID(lease)+`"`, "-o", "json").Output()
		var listed []struct {
			Execution struct {
				RunID string `json:"runId"`
			} `json:"execution"`
		}
		_ = json.Unmarshal(ids, &listed)
		for _, r := range listed {
			events, _ := exec.Command(temporal, "workflow", "show", "--address", devstack.TemporalAddress,
				"-w", api.DeployWorkflowID(lease), "-r", r.Execution.RunID, "--detailed").CombinedOutput()
			t.Logf("run %s of %s:\n%s", r.Execution.RunID, api.DeployWorkflowID(lease), events)
		}
	})
	trigger := exec.Command(env.Stack.Bin(devstack.Temporal), "schedule", "trigger", "--address", devstack.TemporalAddress, "--schedule-id", id)
	b, err := trigger.CombinedOutput()
	require.NoError(t, err, "temporal schedule trigger: %s", b)

	var st api.DeployStatus
	testenv.Eventually(t, 3*time.Minute, 250*time.Millisecond, "the scheduled restart never ran", func() (bool, string) {
		code, out, stderr := runCLI("status", lease, "-o", "json", "--temporal-address", devstack.TemporalAddress, "--task-queue", tq, "--kubeconfig", env.Stack.Kubeconfig())
		if code != 0 {
			return false, "the CLI failed: " + stderr
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return false, err.Error()
		}
		return st.Revision >= 3 && st.Phase == api.PhaseActive && !st.Pending, fmt.Sprintf("revision %d, %s, pending %v", st.Revision, st.Phase, st.Pending)
	})
	last := st.History[len(st.History)-1]
	assert.Equal(t, "schedule", last.Trigger)
	assert.Equal(t, "rollout", st.Classes["web"], "a restart is a new revision")

	list, err := env.Kube.AppsV1().ReplicaSets(manifest.Namespace(lease)).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	restarted := 0
	for _, rs := range list.Items {
		if rs.Spec.Template.Annotations[api.RestartedAtAnnotation] != "" && rs.Status.AvailableReplicas == 2 {
			restarted++
		}
	}
	assert.Equal(t, 1, restarted, "the pods run a restarted revision")

	out, _ = cli(t, env, tq, "history", lease)
	assert.Regexp(t, `#1\s+cli\s+.*Succeeded`, out)
	assert.Regexp(t, `#3\s+schedule\s+.*Succeeded`, out)

	// The schedule's own run had a timestamped ID and handed off.
	runs, err := exec.Command(env.Stack.Bin(devstack.Temporal), "workflow", "list", "--address", devstack.TemporalAddress,
		"--query", `WorkflowType="ScheduledDeployWorkflow" AND TaskQueue="`+tq+`"`).CombinedOutput()
	require.NoError(t, err, "%s", runs)
	assert.Contains(t, string(runs), "scheduled-"+lease+"-restart-")
	assert.True(t, strings.Contains(string(runs), "Completed"), "%s", runs)
}
