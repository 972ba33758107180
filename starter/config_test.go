package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 10.3 and 10.4: the CLI finds Temporal through a temporal.toml
// profile selected by TEMPORAL_PROFILE (as the temporal CLI does), and the
// cluster through kubectl's loading rules: KUBECONFIG and --context over a
// kubeconfig of two contexts. What it cannot reach exits 3.
func TestCLIFindsTemporalByProfileAndTheClusterByContext(t *testing.T) {
	env := testenv.GetSerial(t) // it sets the environment
	dir := t.TempDir()

	toml := filepath.Join(dir, "temporal.toml")
	require.NoError(t, os.WriteFile(toml, []byte(`
[profile.default]
address = "127.0.0.1:1"

[profile.local]
address = "`+devstack.TemporalAddress+`"
namespace = "default"
`), 0o600))
	t.Setenv("TEMPORAL_CONFIG_FILE", toml)
	t.Setenv("TEMPORAL_ADDRESS", "")
	require.NoError(t, os.Unsetenv("TEMPORAL_ADDRESS"))

	// Two contexts: "broken" (current, nothing listens) and "local".
	cfg, err := clientcmd.LoadFromFile(env.Stack.Kubeconfig())
	require.NoError(t, err)
	ctx := cfg.Contexts[cfg.CurrentContext]
	broken := *cfg.Clusters[ctx.Cluster]
	broken.Server = "https://127.0.0.1:1"
	cfg.Clusters["broken"] = &broken
	cfg.Contexts["local"] = ctx
	cfg.Contexts["broken"] = &clientcmdapi.Context{Cluster: "broken", AuthInfo: ctx.AuthInfo}
	cfg.CurrentContext = "broken"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))
	t.Setenv("KUBECONFIG", kubeconfig)

	lease := testenv.ShortName("cfg")
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(crds.Leases).Delete(context.Background(), lease, metav1.DeleteOptions{})
	})
	code, stdout, stderr := runCLI("lease", "create", lease, "--owner", "acme", "--context", "local", "-o", "json")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, lease)

	code, stdout, stderr = runCLI("lease", "list", "--context", "local", "-o", "wide")
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `LEASE\s+OWNER\s+STATE\s+NAMESPACE\s+WORKFLOW\s+CLOSED\s+UID`, stdout)
	assert.Regexp(t, lease+`\s+acme\s+active\s+lease-`+lease+`\s+deploy-`+lease+`\s+-\s+[0-9a-f-]{36}`, stdout)

	code, _, stderr = runCLI("lease", "list")
	assert.Equal(t, 3, code, "the current context's cluster is unreachable: exit 3\n%s", stderr)

	t.Setenv("TEMPORAL_PROFILE", "local")
	code, stdout, stderr = runCLI("schedule", "list", "-o", "json")
	assert.Equal(t, 0, code, "TEMPORAL_PROFILE=local reaches the dev server: %s", stderr)
	assert.NotEmpty(t, stdout)

	t.Setenv("TEMPORAL_PROFILE", "default")
	code, _, stderr = runCLI("schedule", "list", "--temporal-retry", "1s")
	assert.Equal(t, 3, code, "the default profile points nowhere: exit 3\n%s", stderr)
	assert.Contains(t, stderr, "cannot reach Temporal at 127.0.0.1:1")

	code, _, stderr = runCLI("schedule", "list", "--temporal-profile", "nope")
	assert.Equal(t, 2, code, "a profile that does not exist is bad input")
	assert.Contains(t, stderr, "unable to find profile nope")

	// A TLS mismatch is not transient: no retrying, exit 3, what to set.
	pki, other := testenv.NewPKI(t), testenv.NewPKI(t)
	front := testenv.TLSFront(t, pki, devstack.TemporalAddress, true)
	code, _, stderr = runCLI("schedule", "list", "--temporal-address", front, "--temporal-tls-ca", other.CA,
		"--temporal-tls-cert", pki.ClientCert, "--temporal-tls-key", pki.ClientKey)
	assert.Equal(t, 3, code, stderr)
	assert.Contains(t, stderr, "certificate is not trusted")
	assert.NotContains(t, stderr, "waiting for Temporal", "a TLS error is not retried as transient")
	code, _, stderr = runCLI("schedule", "list", "--temporal-address", front, "--temporal-tls-ca", pki.CA,
		"--temporal-tls-cert", pki.ClientCert, "--temporal-tls-key", pki.ClientKey)
	assert.Equal(t, 0, code, "mutual TLS: %s", stderr)
}
