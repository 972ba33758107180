package reserve

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalizeHostname(t *testing.T) {
	for in, want := range map[string]string{
		"web.example.com":    "web.example.com",
		"Web.Example.COM.":   "web.example.com",
		" api.example.com  ": "api.example.com",
		"localhost":          "localhost",
		"a-1.b-2.example":    "a-1.b-2.example",
	} {
		got, err := NormalizeHostname(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", ".", "*.example.com", "web_1.example.com", "-web.example.com", "web..example.com",
		strings.Repeat("a", 64) + ".example.com", strings.Repeat("abcdefg.", 32) + "com", "web.example.com/x", "10.0.0.1:80"} {
		_, err := NormalizeHostname(in)
		assert.True(t, errors.Is(err, ErrInvalidHostname), "%q: %v", in, err)
	}
}

func TestMatchBlocked(t *testing.T) {
	blocked := normalizeBlocked([]string{"Blocked.Example.com.", ".evil.example", "", "  ", ".", "exact.test"})
	assert.Equal(t, []string{"blocked.example.com", ".evil.example", "exact.test"}, blocked)
	for _, tc := range []struct {
		host, rule string
	}{
		{"blocked.example.com", "blocked.example.com"},
		{"a.evil.example", ".evil.example"},
		{"a.b.evil.example", ".evil.example"},
		{"exact.test", "exact.test"},
		{"evil.example", ""},            // a ".suffix" rule blocks the names under it, not itself
		{"notevil.example", ""},         // suffix matches at a label boundary only
		{"sub.blocked.example.com", ""}, // an exact rule blocks only that name
		{"sub.exact.test", ""},
		{"example.com", ""},
	} {
		rule, ok := matchBlocked(blocked, tc.host)
		assert.Equal(t, tc.rule != "", ok, tc.host)
		assert.Equal(t, tc.rule, rule, tc.host)
	}
	h := &Hostnames{blocked: blocked}
	rule, ok := h.Blocked("WWW.Evil.Example.")
	assert.True(t, ok)
	assert.Equal(t, ".evil.example", rule)
}

func addrs(p Pool) []string {
	var out []string
	for a := range p.Addrs() {
		out = append(out, a.String())
	}
	return out
}

func TestPoolIteration(t *testing.T) {
	pool := func(s string) Pool { return Pool{CIDR: netip.MustParsePrefix(s).Masked()} }

	assert.Equal(t, []string{"10.200.0.1", "10.200.0.2"}, addrs(pool("10.200.0.0/30")), "/30: no network, no broadcast")
	assert.Equal(t, []string{"10.200.0.9", "10.200.0.10", "10.200.0.11", "10.200.0.12", "10.200.0.13", "10.200.0.14"},
		addrs(pool("10.200.0.8/29")))
	assert.Equal(t, []string{"10.0.0.4", "10.0.0.5"}, addrs(pool("10.0.0.4/31")), "RFC 3021 /31: both")
	assert.Equal(t, []string{"10.0.0.7"}, addrs(pool("10.0.0.7/32")))
	assert.Equal(t, []string{"10.200.0.1", "10.200.0.2"}, addrs(pool("10.200.0.3/30")), "host bits are masked")

	all := addrs(pool("10.200.0.0/24"))
	require.Len(t, all, 254)
	assert.Equal(t, "10.200.0.1", all[0])
	assert.Equal(t, "10.200.0.254", all[253])
	assert.NotContains(t, all, "10.200.0.0")
	assert.NotContains(t, all, "10.200.0.255")

	wide := addrs(pool("10.200.0.0/23"))
	require.Len(t, wide, 510)
	assert.Contains(t, wide, "10.200.0.255", "inside a /23, .0.255 is an ordinary address")
	assert.Contains(t, wide, "10.200.1.0")
	assert.Equal(t, "10.200.1.254", wide[509])

	assert.Equal(t, []string{"fd00::1", "fd00::2"}, addrs(pool("fd00::/126")))

	// Iteration stops early when asked.
	var first []netip.Addr
	for a := range pool("10.200.0.0/16").Addrs() {
		first = append(first, a)
		if len(first) == 3 {
			break
		}
	}
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("10.200.0.1"), netip.MustParseAddr("10.200.0.2"), netip.MustParseAddr("10.200.0.3")}, first)

	assert.Empty(t, addrs(Pool{}), "an invalid pool yields nothing")
	assert.Error(t, Pool{}.Validate())
	assert.NoError(t, pool("10.200.0.0/24").Validate())
}

func TestPoolContains(t *testing.T) {
	p := Pool{CIDR: netip.MustParsePrefix("10.200.0.0/24")}
	for s, want := range map[string]bool{
		"10.200.0.1": true, "10.200.0.254": true, "10.200.0.0": false, "10.200.0.255": false,
		"10.200.1.1": false, "::ffff:10.200.0.1": false, "fd00::1": false,
	} {
		assert.Equal(t, want, p.Contains(netip.MustParseAddr(s)), s)
	}
	for a := range p.Addrs() {
		assert.True(t, p.Contains(a))
	}
}

func TestLastAddr(t *testing.T) {
	for prefix, want := range map[string]string{
		"10.200.0.0/24": "10.200.0.255", "10.0.0.0/8": "10.255.255.255", "10.1.2.3/32": "10.1.2.3",
		"0.0.0.0/0": "255.255.255.255", "10.200.0.0/23": "10.200.1.255", "fd00::/64": "fd00::ffff:ffff:ffff:ffff",
	} {
		assert.Equal(t, want, lastAddr(netip.MustParsePrefix(prefix)).String(), prefix)
	}
}

func TestObjectName(t *testing.T) {
	assert.Equal(t, "10.200.0.5", objectName(netip.MustParseAddr("10.200.0.5")))
	assert.Equal(t, "fd00-0000-0000-0000-0000-0000-0000-0001", objectName(netip.MustParseAddr("fd00::1")))
	names := []string{objectName(netip.MustParseAddr("::1")), objectName(netip.MustParseAddr("fd00::a"))}
	for _, n := range names {
		_, err := NormalizeHostname(n) // a DNS subdomain, i.e. a valid object name
		assert.NoError(t, err, n)
	}
	assert.False(t, slices.Contains(names, ""))
}

func TestValidateEndpoint(t *testing.T) {
	assert.NoError(t, ValidateEndpoint("myendpoint"))
	assert.NoError(t, ValidateEndpoint("my_endpoint-1"))
	assert.Error(t, ValidateEndpoint(""))
	assert.Error(t, ValidateEndpoint("a/b"))
	assert.Error(t, ValidateEndpoint(strings.Repeat("e", 64)))
}
