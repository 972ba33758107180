package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/worker/testenv"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrorsExitTwoAndSayWhatToDo(t *testing.T) {
	code, _, stderr := runCLI()
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "rollout")

	code, _, stderr = runCLI("deploy-everything")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unknown command "deploy-everything"`)

	code, _, stderr = runCLI("rollout", "--service", "web")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "give --image (and --replicas) or -f deployment.yaml")

	code, _, stderr = runCLI("rollout", "--image", "nginx", "--service", "web", "-o", "xml")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `-o "xml": want text, json, yaml or wide`)

	code, _, stderr = runCLI("status", "--no-such-flag")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "unknown flag: --no-such-flag")
}

func TestRolloutFileWithUnknownFieldIsRejected(t *testing.T) {
	f := filepath.Join(t.TempDir(), "d.yaml")
	require.NoError(t, os.WriteFile(f, []byte("metadata: {name: web}\nspec: {replicas: 2, replicaz: 3}\n"), 0o644))
	code, _, stderr := runCLI("rollout", "-f", f)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unknown field "replicaz"`)
}

func TestRolloutCommandAgainstTheLocalStack(t *testing.T) {
	env := testenv.Get(t)
	ns, tq := env.Namespace(t), env.Worker(t)

	code, stdout, stderr := runCLI("rollout", "--temporal-address", devstack.TemporalAddress, "--task-queue", tq,
		"--namespace", ns, "--service", "api", "--image", "nginx:1.27", "--replicas", "2")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "rollout "+ns+"/api started: workflow "+api.RolloutWorkflowID(ns, "api"))
	assert.Contains(t, stdout, "http://127.0.0.1:8233/namespaces/default/workflows/"+api.RolloutWorkflowID(ns, "api")+"/")
	assert.Regexp(t, `replicaset "api-[a-z0-9]+" successfully rolled out: 2/2 available`, stdout)

	// -o json prints the result as JSON; the second run finds the work done.
	code, stdout, stderr = runCLI("rollout", "--temporal-address", devstack.TemporalAddress, "--task-queue", tq,
		"--namespace", ns, "--service", "api", "--image", "nginx:1.27", "--replicas", "2", "-o", "json")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	var res api.RolloutResult
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), stdout)
	assert.Equal(t, int32(2), res.AvailableReplicas)

	rss, err := env.Kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, rss.Items, 1)
	assert.Equal(t, res.NewReplicaSet, rss.Items[0].Name)
}

// `deployflow version` says which build runs, as the worker's
// deployflow_build_info metric does.
func TestVersionCommand(t *testing.T) {
	code, stdout, _ := runCLI("version")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `^deployflow \S+ \(build \S+, go1\.\d+`, stdout)
	code, stdout, _ = runCLI("version", "-o", "json")
	assert.Equal(t, 0, code)
	var v struct{ Version, BuildID, GoVersion string }
	require.NoError(t, json.Unmarshal([]byte(stdout), &v))
	assert.NotEmpty(t, v.BuildID)
	assert.Contains(t, v.GoVersion, "go1.")
}
