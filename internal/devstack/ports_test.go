package devstack

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Guards the ports tests give the workers they start: below the kernel's
// ephemeral range, where no connection's local end lands, and never the
// same twice. Before, a port from 127.0.0.1:0 (in that range) was taken
// between the check and the worker's bind, and a CI run's test read
// another process's metrics on it.
func TestFreeAddrIsBelowTheEphemeralRangeAndNeverHandedOutTwice(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		addr, err := FreeAddr()
		require.NoError(t, err)
		host, p, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1", host)
		port, _ := strconv.Atoi(p)
		assert.GreaterOrEqual(t, port, firstFreePort)
		assert.Less(t, port, ephemeralStart(), "not in the ephemeral range")
		assert.False(t, seen[addr], "handed out twice: %s", addr)
		seen[addr] = true
		l, err := net.Listen("tcp", addr)
		require.NoError(t, err, "free to bind")
		_ = l.Close()
	}
}
