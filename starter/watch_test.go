package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/internal/devstack"
)

// `status --watch` draws the rollout as a tree and exits like `kubectl
// rollout status`: 0 once the deploy is complete, 1 at a progress deadline.
func TestStatusWatchExitsZeroOnSuccessAndNonZeroOnADeadline(t *testing.T) {
	env, tq, lease := newLease(t, "watch")
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("lease: "+lease+"\nservices:\n  - name: web\n    replicas: 3\n"+body), 0o644))
		return p
	}
	good := write("good.yaml", "    image: nginx:1.27\n    podAnnotations: {deployflow.dev/ready-after: 1s}\n")
	broken := write("broken.yaml", "    image: nginx:broken\n    podLabels: {deployflow.dev/never-ready: \"true\"}\n"+
		"    rollout: {progressDeadlineSeconds: 3, autoRollback: false}\n")
	flags := []string{"--temporal-address", devstack.TemporalAddress, "--task-queue", tq, "--kubeconfig", env.Stack.Kubeconfig()}
	cli(t, env, tq, "lease", "create", lease, "--owner", "acme")

	cli(t, env, tq, "deploy", "-f", good)
	code, out, stderr := runCLI(append([]string{"status", lease, "--watch", "--interval", "200ms"}, flags...)...)
	assert.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, out, "lease "+lease+" (owner acme) — Active")
	assert.Contains(t, out, "└─ web: rollout")
	assert.Regexp(t, `rev 1 web-[a-z0-9]+ nginx:1.27  desired 3  ready 3  available 3  ← new`, out)

	cli(t, env, tq, "deploy", "-f", broken)
	code, out, stderr = runCLI(append([]string{"status", lease, "--watch", "--interval", "200ms"}, flags...)...)
	assert.Equal(t, 1, code, "a deadline exits non-zero; stdout: %s", out)
	assert.Contains(t, stderr, "is Failed")
	assert.Contains(t, stderr, "ProgressDeadlineExceeded")
	assert.Contains(t, out, "nginx:broken")
}
