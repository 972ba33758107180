package main

import (
	"context"
	"fmt"
	"os"
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

// Issue 23.4 from the CLI: `deploy --plan` prints a placement's waves as
// the tree the workflow executes, `deploy --wait` runs it and prints the
// same tree with each operation's state and each cluster's deploy,
// `status` shows it (`--watch` follows it, a held wave included, until it
// ends), `history` shows the executed waves, and `abort <lease>` refuses
// when no placement runs. `--cluster` reaches another cluster's lease
// workflow and rollouts: its status, a canary promoted there, a restart.
func TestAPlacementFromTheCLI(t *testing.T) {
	env := testenv.Get(t)
	eu := env.Cluster(t, "cli-eu")                                                     // named cli-eu-N
	named := func(s string) string { return strings.ReplaceAll(s, "cli-eu", eu.Name) } // the text with the cluster's name
	tq := env.PlacementWorker(t, eu)
	lease := testenv.ShortName("cli")
	ctx := context.Background()
	_, err := env.Activities().Leases.Create(ctx, lease, "acme")
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range []string{"", eu.Name} {
			_ = env.Temporal.TerminateWorkflow(ctx, api.DeployWorkflowIDIn(lease, c), "", "test over")
		}
		_ = env.Kube.CoreV1().Namespaces().Delete(ctx, manifest.Namespace(lease), metav1.DeleteOptions{})
		_ = eu.Kube.CoreV1().Namespaces().Delete(ctx, manifest.Namespace(lease), metav1.DeleteOptions{})
		_ = env.Dynamic.Resource(crds.Leases).Delete(ctx, lease, metav1.DeleteOptions{})
	})
	file := filepath.Join(t.TempDir(), "placed.yaml")
	require.NoError(t, os.WriteFile(file, []byte(named(fmt.Sprintf(`lease: %s
services:
  - name: web
    image: nginx:1.27
    replicas: 2
placement:
  waves:
    - clusters: [local]
      pause: {duration: 1s}
    - clusters: [cli-eu]
`, lease))), 0o644))

	out, _ := cli(t, env, tq, "deploy", "-f", file, "--plan")
	assert.Equal(t, named(fmt.Sprintf(`place lease %s in 2 waves
├─ wave 1
│  ├─ deploy to cluster local
│  └─ pause 1s
└─ wave 2
   └─ deploy to cluster cli-eu
`, lease)), out)

	out, _ = cli(t, env, tq, "deploy", "-f", file, "--wait")
	assert.Contains(t, out, "placement of lease "+lease+" started (workflow placement-"+lease+")")
	assert.Contains(t, out, "placement of lease "+lease+": Succeeded")
	assert.Regexp(t, named(`└─ deploy to cluster cli-eu +done`), out)
	assert.Contains(t, out, named("wave 2, cluster cli-eu: Active (deploy 1: Succeeded)"))

	out, _ = cli(t, env, tq, "status", lease)
	assert.Contains(t, out, "placement of lease "+lease+": Succeeded")
	assert.Contains(t, out, "wave 1, cluster local: Active")

	out, _ = cli(t, env, tq, "history", lease)
	assert.Contains(t, out, "placement #1, as executed:\nplacement of lease "+lease+": Succeeded")
	assert.Regexp(t, `pause 1s +done`, out)

	code, _, stderr := runCLI("abort", lease, "--temporal-address", devstack.TemporalAddress, "--task-queue", tq)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "abort the placement of lease "+lease)

	// A wave with approval: the next waits for `promote <lease>`.
	approved := filepath.Join(t.TempDir(), "approved.yaml")
	require.NoError(t, os.WriteFile(approved, []byte(named(fmt.Sprintf(`lease: %s
services:
  - name: web
    image: nginx:1.28
    replicas: 2
placement:
  waves:
    - clusters: [local]
      approval: true
    - clusters: [cli-eu]
`, lease))), 0o644))
	out, _ = cli(t, env, tq, "deploy", "-f", approved)
	assert.Contains(t, out, "placement of lease "+lease+" started")
	testenv.Eventually(t, 3*time.Minute, 250*time.Millisecond, "wave 1 never awaited approval", func() (bool, string) {
		code, out, _ := runCLI("status", lease, "--temporal-address", devstack.TemporalAddress, "--task-queue", tq, "--kubeconfig", env.Stack.Kubeconfig())
		return code == 0 && strings.Contains(out, "wait for approval (deployflow promote "+lease+")  running"), out
	})
	rss, err := eu.Kube.AppsV1().ReplicaSets(manifest.Namespace(lease)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, rss.Items, 1, "cluster cli-eu still runs the first version only")
	// `status --watch` follows the placement, held wave included, until it
	// ends (exit 0: Succeeded).
	var watchOut, watchErr testenv.SyncBuffer // read while the command writes them
	watched := make(chan int, 1)
	go func() {
		watched <- run(context.Background(), []string{"status", lease, "--watch", "--interval", "200ms", "--timeout", "2m",
			"--temporal-address", devstack.TemporalAddress, "--task-queue", tq}, &watchOut, &watchErr)
	}()
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the watch never drew the held wave", func() (bool, string) {
		return strings.Contains(watchOut.String(), "wait for approval (deployflow promote "+lease+")  running"), watchOut.String() + watchErr.String()
	})
	out, _ = cli(t, env, tq, "promote", lease)
	assert.Contains(t, out, "placement of lease "+lease+": promoted")
	assert.Equal(t, 0, <-watched, "the watch ends 0 once the placement succeeded: %s", watchErr.String())
	assert.Contains(t, watchOut.String(), "placement of lease "+lease+": Succeeded")
	assert.Contains(t, watchOut.String(), named("wave 2, cluster cli-eu: Active (deploy 2"))

	// Another cluster's lease workflow and rollouts (--cluster): its status,
	// and a canary there paused for a human, promoted from the CLI.
	out, _ = cli(t, env, tq, "status", lease, "--cluster", eu.Name)
	assert.Contains(t, out, named("cluster cli-eu\nlease "+lease+" (owner acme): Active, deploy #2"))
	assert.Contains(t, out, "deploy-"+lease+"@"+eu.Name)
	canary := filepath.Join(t.TempDir(), "canary.yaml")
	require.NoError(t, os.WriteFile(canary, []byte(named(fmt.Sprintf(`lease: %s
services:
  - name: web
    image: nginx:1.29
    replicas: 2
    rollout:
      strategy: Canary
      steps:
        - setWeight: 50
        - pause: {}
placement:
  waves:
    - clusters: [cli-eu]
`, lease))), 0o644))
	cli(t, env, tq, "deploy", "-f", canary)
	testenv.Eventually(t, 3*time.Minute, 250*time.Millisecond, "cli-eu's canary never paused", func() (bool, string) {
		code, out, _ := runCLI("status", lease, "--cluster", eu.Name, "--temporal-address", devstack.TemporalAddress, "--task-queue", tq)
		return code == 0 && strings.Contains(out, "web: canary step 2/2: pause until promoted"), out
	})
	code, _, stderr = runCLI("promote", lease, "web", "--temporal-address", devstack.TemporalAddress, "--task-queue", tq)
	assert.Equal(t, 1, code, "no rollout of web in the worker's own cluster")
	assert.Contains(t, stderr, "promote acts on a rollout in progress")
	out, _ = cli(t, env, tq, "promote", lease, "web", "--cluster", eu.Name)
	assert.Contains(t, out, named("web of lease "+lease+" in cluster cli-eu: promoted past step 2/2 (pause until promoted)"))
	cli(t, env, tq, "status", lease, "--cluster", eu.Name, "--watch", "--timeout", "2m")
	testenv.Eventually(t, 3*time.Minute, 250*time.Millisecond, "the canary's placement never ended", func() (bool, string) {
		code, out, _ := runCLI("status", lease, "--temporal-address", devstack.TemporalAddress, "--task-queue", tq)
		return code == 0 && strings.Contains(out, "placement of lease "+lease+": Succeeded"), out
	})
	code, _, stderr = runCLI("abort", lease, "--cluster", eu.Name, "--temporal-address", devstack.TemporalAddress, "--task-queue", tq)
	assert.Equal(t, 2, code, "a placement spans its clusters: --cluster is refused on it")
	assert.Contains(t, stderr, "--cluster: abort <lease> acts on the lease's placement, in all its clusters")
	out, _ = cli(t, env, tq, "restart", lease, "--cluster", eu.Name)
	assert.Contains(t, out, named("restarting every pod of lease "+lease+" in cluster cli-eu (deployflow status "+lease+" --watch --cluster cli-eu)"))
	// The restart rolls out as the service says, a canary: promoted there too.
	testenv.Eventually(t, 3*time.Minute, 250*time.Millisecond, "the restart's canary never paused", func() (bool, string) {
		code, out, _ := runCLI("status", lease, "--cluster", eu.Name, "--temporal-address", devstack.TemporalAddress, "--task-queue", tq)
		return code == 0 && strings.Contains(out, "deploy #4") && strings.Contains(out, "web: canary step 2/2: pause until promoted"), out
	})
	cli(t, env, tq, "promote", lease, "web", "--cluster", eu.Name)
	out, _ = cli(t, env, tq, "status", lease, "--cluster", eu.Name, "--watch", "--timeout", "2m")
	assert.Contains(t, out, "lease "+lease+" (owner acme) — Active, deploy #4")
	rss, err = eu.Kube.AppsV1().ReplicaSets(manifest.Namespace(lease)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, rss.Items, 4, "cli-eu: 1.27, 1.28, 1.29 and the restart's")
}
