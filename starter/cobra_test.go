package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/version"
)

// Issue 10.6: the CLI has the ecosystem's shape — shell completion of
// commands, arguments, flags and -o values; kubectl-like help with
// examples; -o yaml.
func TestCLICompletesAndHelpsLikeKubectl(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_deployflow", "zsh": "#compdef deployflow", "fish": "complete -c deployflow"} {
		code, stdout, stderr := runCLI("completion", shell)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, want, shell)
	}
	// As docs/cli.md says: source <(deployflow completion bash).
	_, script, _ := runCLI("completion", "bash")
	file := filepath.Join(t.TempDir(), "deployflow.bash")
	require.NoError(t, os.WriteFile(file, []byte(script), 0o600))
	out, err := exec.Command("bash", "-c", "source "+file+" && complete -p deployflow").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "__start_deployflow deployflow")

	complete := func(args ...string) []string {
		t.Helper()
		code, stdout, stderr := runCLI(append([]string{"__complete"}, args...)...)
		require.Equal(t, 0, code, stderr)
		var out []string
		for _, l := range strings.Split(stdout, "\n") {
			if l != "" && !strings.HasPrefix(l, ":") {
				out = append(out, strings.SplitN(l, "\t", 2)[0])
			}
		}
		return out
	}
	assert.Equal(t, []string{"status"}, complete("sta"))
	assert.Contains(t, complete("deploy", "--wa"), "--wait")
	assert.Contains(t, complete("status", "x", "--con"), "--context")
	assert.Equal(t, []string{"create", "close", "list"}, complete("lease", ""))
	assert.Equal(t, []string{"text", "json", "yaml", "wide"}, complete("status", "x", "-o", ""))

	code, stdout, _ := runCLI("deploy", "--help")
	require.Equal(t, 0, code)
	for _, want := range []string{"Usage:\n  deployflow deploy -f manifest.yaml", "Examples:\n  deployflow deploy -f examples/shop.yaml --wait",
		"--timeout duration", "--context string", "-o, --o string"} {
		assert.Contains(t, stdout, want)
	}
	code, stdout, _ = runCLI("--help")
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, "Exit codes: 0 ok; 1 the deploy or rollout failed, or a deadline passed; 2 bad input; 3 Temporal or the")

	code, stdout, stderr := runCLI("version", "-o", "yaml")
	require.Equal(t, 0, code, stderr)
	var v version.Info
	require.NoError(t, yaml.UnmarshalStrict([]byte(stdout), &v), stdout)
	assert.Equal(t, version.Get(), v)
}

// --timeout bounds a wait: a deploy whose pods never become ready, waited
// for with --timeout, exits 1 saying so (the deploy itself goes on).
func TestTimeoutEndsAWaitWithExitCodeOne(t *testing.T) {
	env, tq, lease := newLease(t, "timeout")
	cli(t, env, tq, "lease", "create", lease, "--owner", "acme")
	file := filepath.Join(t.TempDir(), "m.yaml")
	require.NoError(t, os.WriteFile(file, []byte("lease: "+lease+"\nservices:\n  - name: web\n    image: nginx:1.27\n    replicas: 2\n"+
		"    podLabels: {deployflow.dev/never-ready: \"true\"}\n    rollout: {progressDeadlineSeconds: 600}\n"), 0o600))
	code, _, stderr := runCLI("deploy", "-f", file, "--wait", "--timeout", "3s",
		"--temporal-address", devstack.TemporalAddress, "--task-queue", tq, "--kubeconfig", env.Stack.Kubeconfig())
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "timed out after 3s (--timeout)")
}
