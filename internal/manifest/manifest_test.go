package manifest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNamespace(t *testing.T) {
	assert.Equal(t, "lease-shop-42", Namespace("shop-42"))
	longest := Namespace("a234567890123456789012345678901234567890")
	assert.Empty(t, validation.IsDNS1123Label(longest), "the longest lease ID gives a valid namespace")
}

func TestListings(t *testing.T) {
	m := parsedHappy(t)
	m.Services = append(m.Services, Service{Name: "api", Image: "api", Ports: []Port{
		{Port: 80, Expose: &Expose{HTTP: &HTTPExpose{Hostnames: []string{"api.example.com"}}, IP: "core"}},
	}})
	assert.Equal(t, []string{"web", "dns", "api"}, m.ServiceNames(), "manifest order")
	assert.Equal(t, []string{"api.example.com", "shop.example.com", "www.shop.example.com"}, m.Hostnames())
	assert.Equal(t, []string{"core", "edge"}, m.IPEndpoints(), "sorted, each once")

	empty := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx"}}}
	assert.Nil(t, empty.Hostnames())
	assert.Nil(t, empty.IPEndpoints())

	var nilManifest *Manifest
	assert.Nil(t, nilManifest.ServiceNames())
	assert.Nil(t, nilManifest.Hostnames())
	assert.Nil(t, nilManifest.IPEndpoints())
	_, ok := nilManifest.Lookup("web")
	assert.False(t, ok)
}

func TestLookupDefaults(t *testing.T) {
	s, ok := parsedHappy(t).Lookup("dns")
	require.True(t, ok)
	assert.Equal(t, int32(1), *s.Replicas)
	assert.Equal(t, "Recreate", s.Rollout.Strategy)
	_, ok = parsedHappy(t).Lookup("nope")
	assert.False(t, ok)
}

// The manifest is the deploy workflow's input: its JSON form must carry
// everything, with camelCase keys and int-or-percent values as written.
func TestJSONForm(t *testing.T) {
	raw, err := json.Marshal(happyManifest())
	require.NoError(t, err)
	var generic map[string]any
	require.NoError(t, json.Unmarshal(raw, &generic))
	web := generic["services"].([]any)[0].(map[string]any)
	rollout := web["rollout"].(map[string]any)
	assert.Equal(t, 2.0, rollout["maxSurge"])
	assert.Equal(t, "10%", rollout["maxUnavailable"])
	assert.Equal(t, true, generic["requireApproval"])

	back, err := Parse(raw)
	require.NoError(t, err)
	assert.Equal(t, happyManifest(), back)
}
