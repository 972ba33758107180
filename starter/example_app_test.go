package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 37.5: examples/app.yaml, the real-shaped app (a web front end
// from a private registry with probes, a worker with a secret, a GPU
// inference service), deploys as its header says, with a worker and a
// CLI holding the codec's keys and a provider offering nvidia/a100: the
// GPU pod runs on the GPU node, the private images pull with their
// login, and its status shows the secret redacted.
func TestTheRealShapedAppExampleDeploys(t *testing.T) {
	env := testenv.Get(t).WithCodec(t)
	offered, err := manifest.ParseGPUModels(devstack.GPUModels)
	require.NoError(t, err)
	tq := env.WorkerWith(t, func(a *activities.Activities) {
		a.Limits.Secrets, a.Limits.GPUModels, a.Limits.GPUs = true, offered, 8
	})
	lease := testenv.ShortName("app")
	t.Cleanup(func() {
		_ = env.Temporal.TerminateWorkflow(context.Background(), api.DeployWorkflowID(lease), "", "test over")
		_ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), manifest.Namespace(lease), metav1.DeleteOptions{})
	})
	data, err := os.ReadFile("../examples/app.yaml")
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "app.yaml")
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(data), "lease: demo-app", "lease: "+lease, 1)), 0o644))
	run := func(args ...string) string {
		out, _ := cli(t, env.Env, tq, append(args, "--codec-keys-file", env.KeysFile)...)
		return out
	}
	run("lease", "create", lease, "--owner", "acme")
	out := run("deploy", "-f", file, "--wait")
	assert.Contains(t, out, "Active, deploy #1")

	ns := manifest.Namespace(lease)
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	seen := map[string]int{}
	for _, p := range pods.Items {
		svc := p.Labels[activities.ServiceLabel]
		seen[svc]++
		switch svc {
		case "infer":
			assert.Equal(t, devstack.GPUNode, p.Spec.NodeName, "the GPU service runs on the GPU node")
		case "web", "worker":
			assert.NotEqual(t, devstack.GPUNode, p.Spec.NodeName)
			require.Len(t, p.Spec.ImagePullSecrets, 1, "%s pulls with its login", p.Name)
		}
		if svc == "web" {
			require.NotNil(t, p.Spec.Containers[0].ReadinessProbe)
		}
	}
	assert.Equal(t, map[string]int{"web": 3, "worker": 2, "infer": 1}, seen)
	status := run("status", lease, "-o", "yaml")
	assert.Contains(t, status, "DATABASE_URL: <redacted>")
	assert.NotContains(t, status, "example-password")
	assert.NotContains(t, status, "ghp_exampleDemoTokenNotReal0123")
}
