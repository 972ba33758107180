package main_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 10: deployflow reaches a Temporal server that requires mutual TLS
// (a TLS front requiring client certificates of its own CA, before the dev
// server). The worker, configured by flags, polls through it and runs a
// rollout started by a client configured by the environment (the SDK's
// envconfig variables, as the temporal CLI reads them). A wrong CA, a
// missing client certificate and plaintext are each refused with a message
// saying what to fix, and TLS never falls back to plaintext.
func TestWorkerAndClientsUseMutualTLS(t *testing.T) {
	env := testenv.GetSerial(t) // it sets the environment
	ns := env.Namespace(t)
	pki := testenv.NewPKI(t)
	front := testenv.TLSFront(t, pki, devstack.TemporalAddress, true)
	tq := testenv.Name(t, "tq")

	addr := freeAddr(t)
	startWorker(t, env, tq, addr, "--temporal-address", front,
		"--temporal-tls-ca", pki.CA, "--temporal-tls-cert", pki.ClientCert, "--temporal-tls-key", pki.ClientKey)
	require.Eventually(t, func() bool { return get("http://"+addr+"/readyz") == "ok\n" }, 2*time.Minute, 100*time.Millisecond,
		"the worker never became ready over mutual TLS")

	// The worker refuses to start, saying why, when TLS is wrong (before
	// this test sets TEMPORAL_TLS_* for itself: the workers inherit it).
	other := testenv.NewPKI(t)
	for name, tc := range map[string]struct {
		flags []string
		want  string
	}{
		"a CA that did not sign the server's certificate": {
			[]string{"--temporal-tls-ca", other.CA, "--temporal-tls-cert", pki.ClientCert, "--temporal-tls-key", pki.ClientKey},
			"certificate is not trusted"},
		"no client certificate where the server requires one": {
			[]string{"--temporal-tls-ca", pki.CA}, "client certificate"},
		"plaintext to a TLS server": {nil, "temporal at " + front},
	} {
		t.Run(name, func(t *testing.T) {
			w := startWorker(t, env, tq, freeAddr(t), append([]string{"--temporal-address", front}, tc.flags...)...)
			select {
			case err := <-w.exited:
				require.Error(t, err, "the worker must exit non-zero")
			case <-time.After(2 * time.Minute):
				t.Fatalf("the worker did not give up:\n%s", w.logs.String())
			}
			assert.Contains(t, w.logs.String(), tc.want)
		})
	}

	t.Setenv("TEMPORAL_ADDRESS", front)
	t.Setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", pki.CA)
	t.Setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", pki.ClientCert)
	t.Setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", pki.ClientKey)
	c := dialFromEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.Name(t, "rollout"), TaskQueue: tq},
		api.RolloutWorkflow, api.RolloutInput{Namespace: ns, Service: "web", Deployment: web("nginx:1.27", "0s")})
	require.NoError(t, err)
	var res api.RolloutResult
	require.NoError(t, run.Get(ctx, &res), "the rollout runs on the worker behind mutual TLS")
	assert.Equal(t, int32(10), res.AvailableReplicas)

	// No plaintext fallback: a client configured for TLS does not talk to
	// the plaintext dev server.
	t.Setenv("TEMPORAL_ADDRESS", devstack.TemporalAddress)
	cfg := config.FromEnv()
	require.True(t, cfg.TLSEnabled())
	opts, err := cfg.ClientOptions()
	require.NoError(t, err)
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	_, err = client.DialContext(dctx, opts)
	require.Error(t, err, "a TLS client must not fall back to plaintext")
	assert.NotEmpty(t, config.TLSHint(err), "the error names the TLS problem: %v", err)
}

// dialFromEnv is a client configured as the CLI and the worker configure
// theirs: profile, environment, defaults.
func dialFromEnv(t *testing.T) client.Client {
	t.Helper()
	cfg := config.FromEnv()
	opts, err := cfg.ClientOptions()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}
