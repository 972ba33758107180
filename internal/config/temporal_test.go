package config

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// clearTemporalEnv unsets every variable envconfig reads, so the machine's
// own settings do not leak into a test.
func clearTemporalEnv(t *testing.T) {
	for _, k := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_PROFILE",
		"TEMPORAL_TLS", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
		"TEMPORAL_TLS_SERVER_NAME", "TEMPORAL_CLIENT_AUTHORITY"} {
		t.Setenv(k, "")
		require.NoError(t, os.Unsetenv(k))
	}
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
}

func parse(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse(args))
	if err := c.Resolve(); err != nil {
		return c, err
	}
	return c, c.Validate()
}

const profiles = `
[profile.default]
address = "127.0.0.1:7233"

[profile.prod]
address = "prod.tmprl.cloud:7233"
namespace = "deploys.a1b2c"
api_key = "secret-key"

[profile.staging]
address = "staging:7233"
namespace = "staging"
[profile.staging.tls]
server_ca_cert_path = "/etc/temporal/ca.pem"
client_cert_path = "/etc/temporal/client.pem"
client_key_path = "/etc/temporal/client-key.pem"
`

// TEMPORAL_PROFILE picks a profile of the temporal.toml the temporal CLI
// uses; the environment and then the flags override it field by field.
func TestTemporalProfileSelectsTheServer(t *testing.T) {
	clearTemporalEnv(t)
	file := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(file, []byte(profiles), 0o600))
	t.Setenv("TEMPORAL_CONFIG_FILE", file)

	c, err := parse(t)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7233", c.TemporalAddress, "the default profile")
	assert.Equal(t, DefaultNamespace, c.TemporalNamespace)
	assert.False(t, c.TLSEnabled())

	t.Setenv("TEMPORAL_PROFILE", "prod")
	c, err = parse(t)
	require.NoError(t, err)
	assert.Equal(t, "prod.tmprl.cloud:7233", c.TemporalAddress)
	assert.Equal(t, "deploys.a1b2c", c.TemporalNamespace)
	assert.True(t, c.TLSEnabled(), "an API key turns TLS on")
	opts, err := c.ClientOptions()
	require.NoError(t, err)
	assert.NotNil(t, opts.ConnectionOptions.TLS)
	assert.NotNil(t, opts.Credentials)

	t.Setenv("TEMPORAL_NAMESPACE", "from-env")
	c, err = parse(t, "--temporal-address", "other:7233")
	require.NoError(t, err)
	assert.Equal(t, "other:7233", c.TemporalAddress, "a flag beats the profile")
	assert.Equal(t, "from-env", c.TemporalNamespace, "the environment beats the profile")

	c, err = parse(t, "--temporal-profile", "staging", "--temporal-tls-ca", "/mnt/ca.pem")
	require.NoError(t, err)
	assert.Equal(t, "staging:7233", c.TemporalAddress, "--temporal-profile beats TEMPORAL_PROFILE")
	assert.Equal(t, "/mnt/ca.pem", c.profile.TLS.ServerCACertPath, "a flag's file beats the profile's")
	assert.Equal(t, "/etc/temporal/client.pem", c.profile.TLS.ClientCertPath)

	_, err = parse(t, "--temporal-profile", "nope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--temporal-profile nope")
	assert.Contains(t, err.Error(), "unable to find profile nope")
}

func TestTemporalDefaultsAreTheDevServerWithoutTLS(t *testing.T) {
	clearTemporalEnv(t)
	c, err := parse(t)
	require.NoError(t, err)
	assert.Equal(t, DefaultTemporalAddress, c.TemporalAddress)
	assert.Equal(t, DefaultNamespace, c.TemporalNamespace)
	assert.False(t, c.TLSEnabled())

	_, err = parse(t, "--temporal-tls-cert", "/c.pem")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--temporal-tls-cert and --temporal-tls-key go together")
}

// An API key reaches the server as the Authorization header of every call,
// over TLS (never in plaintext): checked on a gRPC server that records what
// it receives.
func TestAPIKeyIsSentAsBearerTokenOverTLS(t *testing.T) {
	clearTemporalEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	got := make(chan []string, 16)
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		md, _ := metadata.FromIncomingContext(stream.Context())
		got <- md.Get("authorization")
		return status.Error(codes.Unimplemented, "recorder")
	}))
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	t.Setenv("TEMPORAL_ADDRESS", ln.Addr().String())
	t.Setenv("TEMPORAL_API_KEY", "k-123")
	c, err := parse(t)
	require.NoError(t, err)
	opts, err := c.ClientOptions()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = client.DialContext(ctx, opts)
	require.Error(t, err, "an API key means TLS, which this plaintext server does not speak")
	assert.NotEmpty(t, TLSHint(err), "%v", err)
	assert.Empty(t, got, "no call reached the server in plaintext")

	t.Setenv("TEMPORAL_TLS", "false") // explicitly plaintext (a local proxy)
	c, err = parse(t)
	require.NoError(t, err)
	opts, err = c.ClientOptions()
	require.NoError(t, err)
	_, _ = client.DialContext(ctx, opts)
	select {
	case auth := <-got:
		assert.Equal(t, []string{"Bearer k-123"}, auth)
	case <-time.After(5 * time.Second):
		t.Fatal("the server saw no call")
	}
}

// Each TLS failure a user meets is explained with what to set.
func TestDialHintsNameTheFix(t *testing.T) {
	clearTemporalEnv(t)
	tlsOn, err := parse(t, "--temporal-tls")
	require.NoError(t, err)
	plain, err := parse(t)
	require.NoError(t, err)
	for _, tc := range []struct {
		cfg  Config
		err  string
		want string
	}{
		{tlsOn, "remote error: tls: certificate required", "requires a client certificate"},
		{tlsOn, "remote error: tls: bad certificate", "refused the client certificate"},
		{tlsOn, "x509: certificate signed by unknown authority", "--temporal-tls-ca"},
		{tlsOn, "tls: first record does not look like a TLS handshake", "does not speak TLS"},
		{tlsOn, "write tcp 127.0.0.1:1->127.0.0.1:2: write: broken pipe", "may require a client certificate"},
		{plain, "write tcp 127.0.0.1:1->127.0.0.1:2: write: broken pipe", ""},
		{tlsOn, "connection refused", ""},
	} {
		assert.Contains(t, tc.cfg.DialHint(errors.New(tc.err)), tc.want, tc.err)
		if tc.want == "" {
			assert.Empty(t, tc.cfg.DialHint(errors.New(tc.err)), tc.err)
		}
	}
}
