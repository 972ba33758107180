package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
)

// The operator commands on a real lease: scale (a scale-only deploy),
// pause/resume/abort of a rollout in progress, restart.
func TestOperatorCommands(t *testing.T) {
	env, tq, lease := newLease(t, "ops")
	dir := t.TempDir()
	write := func(name, image, readyAfter string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("lease: "+lease+"\nservices:\n  - name: web\n    image: "+image+"\n    replicas: 4\n"+
			"    podAnnotations: {deployflow.dev/ready-after: "+readyAfter+"}\n"), 0o644))
		return p
	}
	waitFor := func(what string, cond func(api.DeployStatus) bool) api.DeployStatus {
		return waitLease(t, env, tq, lease, what, cond)
	}
	cli(t, env, tq, "lease", "create", lease, "--owner", "acme")
	cli(t, env, tq, "deploy", "-f", write("v1.yaml", "nginx:1.26", "0s"), "--wait")

	out, _ := cli(t, env, tq, "scale", lease, "web", "6")
	assert.Contains(t, out, "scaling web of lease "+lease+" to 6")
	st := waitFor("scaled", func(s api.DeployStatus) bool {
		return s.Revision == 2 && s.Phase == api.PhaseActive && !s.Pending
	})
	assert.Equal(t, "scale-only", st.Classes["web"])
	rss, err := env.Kube.AppsV1().ReplicaSets(manifest.Namespace(lease)).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, rss.Items, 1, "scaling makes no new ReplicaSet")
	assert.Equal(t, int32(6), *rss.Items[0].Spec.Replicas)

	cli(t, env, tq, "deploy", "-f", write("v2.yaml", "nginx:1.27", "30s"))
	waitFor("rolling out", func(s api.DeployStatus) bool { return s.Revision == 3 && s.Classes["web"] == "rollout" })
	require.Eventually(t, func() bool {
		code, _, _ := runCLI("pause", lease, "web", "--temporal-address", "127.0.0.1:7233")
		return code == 0
	}, 2*time.Minute, 200*time.Millisecond, "pause never reached the rollout")
	out, _ = cli(t, env, tq, "resume", lease, "web")
	assert.Contains(t, out, "web of lease "+lease+": resumed")
	out, _ = cli(t, env, tq, "abort", lease, "web")
	assert.Contains(t, out, "aborted: rolling back to revision 1")
	st = waitFor("aborted", func(s api.DeployStatus) bool { return len(s.History) == 3 && !s.Pending })
	assert.Contains(t, st.History[len(st.History)-1].Outcome, "RolloutAborted", "%+v", st.History)

	code, _, stderr := runCLI("pause", lease, "web", "--temporal-address", "127.0.0.1:7233")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "pause acts on a rollout in progress")

	out, _ = cli(t, env, tq, "restart", lease)
	assert.Contains(t, out, "restarting every pod of lease "+lease)
	st = waitFor("restarted", func(s api.DeployStatus) bool {
		return s.Revision == 4 && s.Phase == api.PhaseActive && !s.Pending
	})
	assert.Equal(t, "rollout", st.Classes["web"])
}

// A canary from the CLI: the manifest's steps in YAML, the status tree's
// canary line, promote past a pause, and promote refused once nothing is
// left to promote (issue 12.2).
func TestCanaryCommands(t *testing.T) {
	env, tq, lease := newLease(t, "canary")
	dir := t.TempDir()
	write := func(name, image string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("lease: "+lease+"\nservices:\n  - name: web\n    image: "+image+"\n    replicas: 4\n"+
			"    rollout:\n      strategy: Canary\n      steps:\n        - setWeight: 50\n        - pause: {}\n"), 0o644))
		return p
	}
	cli(t, env, tq, "lease", "create", lease, "--owner", "acme")
	cli(t, env, tq, "deploy", "-f", write("v1.yaml", "nginx:1.26"), "--wait")
	cli(t, env, tq, "deploy", "-f", write("v2.yaml", "nginx:1.27"))
	var out string
	var mu sync.Mutex
	seen := assert.Eventually(t, func() bool {
		_, stdout, stderr := runCLI("status", lease, "--temporal-address", devstack.TemporalAddress)
		mu.Lock()
		defer mu.Unlock()
		out = stdout + stderr
		return strings.Contains(out, "web: canary step 2/2: pause until promoted (weight 50%; steps: setWeight 50% → pause until promoted)")
	}, 3*time.Minute, 300*time.Millisecond, "the status never showed the canary's pause")
	mu.Lock()
	t.Log(out)
	mu.Unlock()
	require.True(t, seen)
	// The deploy's tree, live: the rollout runs, the lease check is done.
	assert.Contains(t, out, "  deploy in progress:")
	assert.Regexp(t, `check that lease \S+ is active\s+done`, out)
	assert.Regexp(t, `roll out web: nginx:1.26 → nginx:1.27, 4 → 4 replicas \(canary, 2 steps\)\s+running`, out)

	out, _ = cli(t, env, tq, "promote", lease, "web")
	assert.Contains(t, out, "web of lease "+lease+": promoted past step 2/2 (pause until promoted)")
	cli(t, env, tq, "status", lease, "--watch")

	code, _, stderr := runCLI("promote", lease, "web", "--temporal-address", "127.0.0.1:7233")
	assert.Equal(t, 1, code, "nothing left to promote")
	assert.Contains(t, stderr, "promote acts on a rollout in progress")
}

// Blue-green from the CLI: status shows the preview awaiting promotion,
// promote switches, undo within the scale-down delay switches back.
func TestBlueGreenCommands(t *testing.T) {
	env, tq, lease := newLease(t, "bluegreen")
	dir := t.TempDir()
	write := func(name, image string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("lease: "+lease+"\nservices:\n  - name: web\n    image: "+image+"\n    replicas: 2\n"+
			"    ports: [{port: 80}]\n    rollout:\n      strategy: BlueGreen\n      blueGreen: {scaleDownDelaySeconds: 600}\n"), 0o644))
		return p
	}
	cli(t, env, tq, "lease", "create", lease, "--owner", "acme")
	cli(t, env, tq, "deploy", "-f", write("v1.yaml", "nginx:1.26"), "--wait")
	out, _ := cli(t, env, tq, "deploy", "-f", write("v2.yaml", "nginx:1.27"), "--plan", "--yes")
	assert.Contains(t, out, "├─ roll out web: nginx:1.26 → nginx:1.27, 2 → 2 replicas (blue-green)")
	assert.Contains(t, out, "│  ├─ step 2/5: await promotion (deployflow promote)")
	var mu sync.Mutex
	seen := assert.Eventually(t, func() bool {
		_, stdout, stderr := runCLI("status", lease, "--temporal-address", devstack.TemporalAddress)
		mu.Lock()
		defer mu.Unlock()
		out = stdout + stderr
		return strings.Contains(out, "web: blue-green step 2/5: await promotion (deployflow promote) (active selects ")
	}, 3*time.Minute, 300*time.Millisecond, "the status never showed the preview awaiting promotion")
	mu.Lock()
	t.Log(out)
	mu.Unlock()
	require.True(t, seen)

	out, _ = cli(t, env, tq, "promote", lease, "web")
	assert.Contains(t, out, "web of lease "+lease+": promoted: switching the active Service to the new version")
	require.Eventually(t, func() bool {
		_, stdout, _ := runCLI("status", lease, "--temporal-address", devstack.TemporalAddress)
		return strings.Contains(stdout, "web: blue-green step 5/5: keep the old version 600s for undo")
	}, 3*time.Minute, 300*time.Millisecond, "the status never showed the scale-down delay")
	cli(t, env, tq, "undo", lease, "web")
	code, stdout, stderr := runCLI("status", lease, "--watch", "--temporal-address", devstack.TemporalAddress)
	assert.Equal(t, 1, code, "the undone deploy failed: %s", stdout)
	assert.Contains(t, stderr, "RolloutUndone: web: an operator undid the rollout (back to revision 1)")
}

// An aborted canary fails the deploy and the lease returns to its
// last-known-good manifest; `retry` deploys the failed manifest again.
func TestRetryRedeploysAnAbortedCanary(t *testing.T) {
	env, tq, lease := newLease(t, "retry")
	dir := t.TempDir()
	write := func(name, image string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("lease: "+lease+"\nservices:\n  - name: web\n    image: "+image+"\n    replicas: 2\n"+
			"    rollout:\n      strategy: Canary\n      steps:\n        - setWeight: 50\n        - pause: {}\n"), 0o644))
		return p
	}
	cli(t, env, tq, "lease", "create", lease, "--owner", "acme")
	code, _, stderr := runCLI("retry", lease, "--temporal-address", devstack.TemporalAddress)
	assert.NotEqual(t, 0, code, "no lease workflow yet")
	cli(t, env, tq, "deploy", "-f", write("v1.yaml", "nginx:1.26"), "--wait")
	code, _, stderr = runCLI("retry", lease, "--temporal-address", devstack.TemporalAddress)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "did not fail: there is nothing to retry")

	cli(t, env, tq, "deploy", "-f", write("v2.yaml", "nginx:1.27"))
	waitStatus := func(want string) {
		t.Helper()
		require.Eventually(t, func() bool {
			_, stdout, _ := runCLI("status", lease, "--temporal-address", devstack.TemporalAddress)
			return strings.Contains(stdout, want)
		}, 3*time.Minute, 300*time.Millisecond, "the status never showed %q", want)
	}
	waitStatus("web: canary step 2/2: pause until promoted")
	cli(t, env, tq, "abort", lease, "web")
	code, _, _ = runCLI("status", lease, "--watch", "--temporal-address", devstack.TemporalAddress)
	assert.Equal(t, 1, code, "the aborted deploy failed")

	out, _ := cli(t, env, tq, "retry", lease)
	assert.Contains(t, out, "retrying the failed deploy of lease "+lease)
	waitStatus("web: canary step 2/2: pause until promoted")
	cli(t, env, tq, "promote", lease, "web")
	cli(t, env, tq, "status", lease, "--watch")
	out, _ = cli(t, env, tq, "history", lease)
	assert.Regexp(t, `#3\s+retry\s+\S+\s+\S+\s+web=nginx:1.27\s+Succeeded`, out)
}
