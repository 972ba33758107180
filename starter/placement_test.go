package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/worker/testenv"
	"github.com/deployflow/deployflow/workflows"
)

// Issue 23.4 from the CLI: `deploy --plan` prints a placement's waves as
// the tree the workflow executes, `deploy --wait` runs it and prints the
// same tree with each operation's state and each cluster's deploy,
// `status` shows it, `history` shows the executed waves, and `abort
// <lease>` refuses when no placement runs.
func TestAPlacementFromTheCLI(t *testing.T) {
	env := testenv.Get(t)
	eu := env.Cluster(t, "cli-eu", 2) // this package's extra cluster
	tq := env.PlacementWorker(t, eu)
	lease := testenv.ShortName("cli")
	ctx := context.Background()
	_, err := env.Activities().Leases.Create(ctx, lease, "acme")
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range []string{"", eu.Name} {
			_ = env.Temporal.TerminateWorkflow(ctx, workflows.DeployWorkflowIDIn(lease, c), "", "test over")
		}
		_ = env.Kube.CoreV1().Namespaces().Delete(ctx, manifest.Namespace(lease), metav1.DeleteOptions{})
		_ = eu.Kube.CoreV1().Namespaces().Delete(ctx, manifest.Namespace(lease), metav1.DeleteOptions{})
		_ = env.Dynamic.Resource(crds.Leases).Delete(ctx, lease, metav1.DeleteOptions{})
	})
	file := filepath.Join(t.TempDir(), "placed.yaml")
	require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf(`lease: %s
services:
  - name: web
    image: nginx:1.27
    replicas: 2
placement:
  waves:
    - clusters: [local]
      pause: {duration: 1s}
    - clusters: [cli-eu]
`, lease)), 0o644))

	out, _ := cli(t, env, tq, "deploy", "-f", file, "--plan")
	assert.Equal(t, fmt.Sprintf(`place lease %s in 2 waves
├─ wave 1
│  ├─ deploy to cluster local
│  └─ pause 1s
└─ wave 2
   └─ deploy to cluster cli-eu
`, lease), out)

	out, _ = cli(t, env, tq, "deploy", "-f", file, "--wait")
	assert.Contains(t, out, "placement of lease "+lease+" started (workflow placement-"+lease+")")
	assert.Contains(t, out, "placement of lease "+lease+": Succeeded")
	assert.Regexp(t, `└─ deploy to cluster cli-eu +done`, out)
	assert.Contains(t, out, "wave 2, cluster cli-eu: Active (deploy 1: Succeeded)")

	out, _ = cli(t, env, tq, "status", lease)
	assert.Contains(t, out, "placement of lease "+lease+": Succeeded")
	assert.Contains(t, out, "wave 1, cluster local: Active")

	out, _ = cli(t, env, tq, "history", lease)
	assert.Contains(t, out, "placement #1, as executed:\nplacement of lease "+lease+": Succeeded")
	assert.Regexp(t, `pause 1s +done`, out)

	code, _, stderr := runCLI("abort", lease, "--temporal-address", devstack.TemporalAddress, "--task-queue", tq)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "abort the placement of lease "+lease)
}
