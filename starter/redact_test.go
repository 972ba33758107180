package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Issue 37.3: a status carries manifests whose secret values the CLI
// decoded; its JSON and YAML output shows them redacted, the variables'
// names kept, and output without secrets is byte for byte as before.
func TestTheCLIsJSONAndYAMLOutputRedactsSecrets(t *testing.T) {
	const marker = "s3cr3t-marker-4711"
	m := &manifest.Manifest{Lease: "shop", Services: []manifest.Service{{Name: "web", Image: "ghcr.io/acme/web:1",
		Credentials: &manifest.Credentials{Host: "ghcr.io", Username: "bot", Password: marker},
		SecretEnv:   map[string]string{"DB_PASSWORD": marker}}}}
	st := api.DeployStatus{Lease: "shop", LastGood: m, History: []api.DeployRecord{{Revision: 1}}}

	for _, format := range []string{"json", "yaml"} {
		var buf bytes.Buffer
		var w interface {
			Write([]byte) (int, error)
			Close() error
		}
		if format == "json" {
			w = newJSONWriter(&buf)
		} else {
			w = newYAMLWriter(&buf)
		}
		require.NoError(t, json.NewEncoder(w).Encode(st))
		require.NoError(t, w.Close())
		assert.NotContains(t, buf.String(), marker, format)
		assert.Contains(t, buf.String(), "DB_PASSWORD", "%s: the variable's name stays", format)
		assert.Contains(t, buf.String(), manifest.Redacted, format)
		assert.Contains(t, buf.String(), "bot", "%s: the user name is no secret", format)
	}

	plain := api.DeployStatus{Lease: "shop", Phase: api.PhaseActive}
	want, _ := json.Marshal(plain)
	var buf bytes.Buffer
	w := newJSONWriter(&buf)
	require.NoError(t, json.NewEncoder(w).Encode(plain))
	require.NoError(t, w.Close())
	assert.Equal(t, string(want)+"\n", buf.String())
}
