package config

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/internal/manifest"
)

// --routing: the lease's Ingress by default; with gateway, HTTPRoutes on
// --gateway namespace/name (and listener); a bad value names the flag and
// the fix.
func TestRoutingThroughAGateway(t *testing.T) {
	t.Setenv("DEPLOYFLOW_ROUTING", "")
	parse := func(args ...string) (Config, error) {
		var c Config
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		c.RegisterFlags(fs)
		require.NoError(t, fs.Parse(args))
		require.NoError(t, c.Resolve())
		return c, c.Validate()
	}
	c, err := parse()
	require.NoError(t, err)
	assert.Nil(t, c.Routing.Gateway(), "the Ingress by default")

	c, err = parse("--routing", "gateway", "--gateway", "gateway-system/public", "--gateway-listener", "http")
	require.NoError(t, err)
	assert.Equal(t, &manifest.GatewayRef{Namespace: "gateway-system", Name: "public", Section: "http"}, c.Routing.Gateway())

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--routing", "mesh"}, `--routing "mesh": want ingress or gateway`},
		{[]string{"--routing", "gateway"}, `--gateway "": give the Gateway as namespace/name`},
		{[]string{"--routing", "gateway", "--gateway", "public"}, `--gateway "public": give the Gateway as namespace/name`},
		{[]string{"--routing", "gateway", "--gateway", "gw/public", "--gateway-listener", "HTTP!"}, `--gateway-listener "HTTP!": want a listener's name`},
		{[]string{"--gateway", "gw/public"}, "--gateway gw/public: routes go to a Gateway only with --routing gateway"},
	} {
		_, err := parse(bad.args...)
		require.Error(t, err, "%v", bad.args)
		assert.Contains(t, err.Error(), bad.want)
	}
}
