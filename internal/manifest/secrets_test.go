package manifest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

const secretMarker = "mArKeR-s3cr3t-0x4711"

func secretManifest(password, dbPassword string) *Manifest {
	return &Manifest{Lease: "shop", Services: []Service{{Name: "web", Image: "ghcr.io/acme/web:1.0",
		Env:         map[string]string{"LOG_LEVEL": "info", "ZONE": "eu"},
		Credentials: &Credentials{Host: "ghcr.io", Username: "acme-bot", Password: password},
		SecretEnv:   map[string]string{"DB_PASSWORD": dbPassword}}}}
}

// Issue 37.3: a service's registry login and secret env values are
// immutable Secrets of the lease's namespace, named by their content, that
// the pod refers to; the pod template holds no value. The same values give
// the same names (no new ReplicaSet); a new value, new names.
func TestSecretsRenderAsSecretsThePodRefersTo(t *testing.T) {
	m := secretManifest(secretMarker, secretMarker+"-db").WithDefaults()
	require.NoError(t, m.Validate())
	secrets := m.Secrets()
	require.Len(t, secrets, 2)
	reg, env := secrets[0], secrets[1]
	assert.Equal(t, corev1.SecretTypeDockerConfigJson, reg.Type)
	assert.Equal(t, corev1.SecretTypeOpaque, env.Type)
	for _, s := range secrets {
		assert.Equal(t, "lease-shop", s.Namespace)
		assert.True(t, *s.Immutable)
		assert.Equal(t, "web", s.Labels[SecretLabel])
		assert.True(t, strings.HasSuffix(s.Name, "-"+s.Labels[SecretDigestLabel]), s.Name)
	}
	var cfg struct {
		Auths map[string]struct{ Username, Password, Auth string }
	}
	require.NoError(t, json.Unmarshal(reg.Data[corev1.DockerConfigJsonKey], &cfg))
	assert.Equal(t, "acme-bot", cfg.Auths["ghcr.io"].Username)
	assert.Equal(t, secretMarker, cfg.Auths["ghcr.io"].Password)
	assert.Equal(t, secretMarker+"-db", string(env.Data["DB_PASSWORD"]))

	d, err := m.Deployment("web")
	require.NoError(t, err)
	pod := d.Spec.Template.Spec
	assert.Equal(t, []corev1.LocalObjectReference{{Name: reg.Name}}, pod.ImagePullSecrets)
	var names []string
	for _, e := range pod.Containers[0].Env {
		names = append(names, e.Name)
		if e.Name == "DB_PASSWORD" {
			assert.Empty(t, e.Value)
			assert.Equal(t, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: env.Name}, Key: "DB_PASSWORD"}, e.ValueFrom.SecretKeyRef)
		}
	}
	assert.Equal(t, []string{"DB_PASSWORD", "LOG_LEVEL", "ZONE"}, names, "env sorted by name, plain and secret together")
	b, _ := json.Marshal(d)
	assert.NotContains(t, string(b), secretMarker, "the rendered Deployment (the rollout's input) holds no value")

	again := secretManifest(secretMarker, secretMarker+"-db").WithDefaults().Secrets()
	assert.Equal(t, reg.Name, again[0].Name, "the same values, the same Secret")
	rotated := secretManifest(secretMarker+"-new", secretMarker+"-db").WithDefaults().Secrets()
	assert.NotEqual(t, reg.Name, rotated[0].Name, "a new password, a new Secret")
	assert.Equal(t, env.Name, rotated[1].Name, "the env values unchanged, their Secret too")

	// An image of Docker Hub logs in to Docker Hub's index.
	hub := &Manifest{Lease: "shop", Services: []Service{{Name: "web", Image: "acme/web:1.0",
		Credentials: &Credentials{Host: "docker.io", Username: "acme", Token: secretMarker}}}}
	require.NoError(t, hub.Validate())
	assert.Contains(t, string(hub.Secrets()[0].Data[corev1.DockerConfigJsonKey]), `"https://index.docker.io/v1/"`)
}

// What deployflow prints holds no value: Redacted keeps the names,
// RedactString blanks a value quoted in a message, and no validation
// problem of a secret quotes it.
func TestSecretsAreRedactedAndNeverQuoted(t *testing.T) {
	m := secretManifest(secretMarker, secretMarker+"-db")
	assert.True(t, m.HasSecrets())
	r := m.Redacted()
	b, _ := json.Marshal(r)
	assert.NotContains(t, string(b), secretMarker)
	assert.Equal(t, Redacted, r.Services[0].SecretEnv["DB_PASSWORD"])
	assert.Equal(t, "acme-bot", r.Services[0].Credentials.Username)
	assert.Equal(t, secretMarker, m.Services[0].Credentials.Password, "the original is untouched")
	assert.Equal(t, "create failed: "+Redacted+" rejected", m.RedactString("create failed: "+secretMarker+" rejected"))

	bad := []*Manifest{
		{Lease: "shop", Services: []Service{{Name: "web", Image: "ghcr.io/a/b:1", Credentials: &Credentials{Host: "ghcr.io", Username: "bot", Password: secretMarker, Token: secretMarker}}}},
		{Lease: "shop", Services: []Service{{Name: "web", Image: "ghcr.io/a/b:1", Credentials: &Credentials{Host: "quay.io", Username: "bot", Password: secretMarker}}}},
		{Lease: "shop", Services: []Service{{Name: "web", Image: "nginx:1", Env: map[string]string{"K": "v"}, SecretEnv: map[string]string{"K": secretMarker, "1X": secretMarker}}}},
		{Lease: "shop", Services: []Service{{Name: "web", Image: "nginx:1", SecretEnv: map[string]string{"BIG": strings.Repeat(secretMarker, MaxSecretValueBytes)}}}},
	}
	for i, b := range bad {
		err := b.Validate()
		require.Error(t, err, "manifest %d", i)
		assert.NotContains(t, err.Error(), secretMarker, "manifest %d", i)
	}

	// A provider without encryption keys refuses secrets.
	require.NoError(t, m.Validate())
	err := m.CheckLimits(DefaultLimits())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "services[0].credentials: this provider keeps no secrets: its workers have no encryption keys (the operator's --codec-keys-file)")
	l := DefaultLimits()
	l.Secrets = true
	assert.NoError(t, m.CheckLimits(l))
}

// The catalogue's bad manifests with secrets quote none in their errors.
func TestTheCataloguesSecretsAreNotQuoted(t *testing.T) {
	for _, f := range []string{"128-credentials-not-the-images-registry.yaml", "129-credentials-password-and-token.yaml", "131-secret-env-also-in-env.yaml", "132-secret-env-bad-name.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "bad", f))
		require.NoError(t, err)
		_, err = Parse(data)
		require.Error(t, err, f)
		assert.NotContains(t, err.Error(), "hunter2-secret", f)
		assert.NotContains(t, err.Error(), "ghp_0123456789", f)
	}
}
