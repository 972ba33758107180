package kube

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func kubeconfig(t *testing.T, dir, name, current string, contexts map[string]string) string {
	t.Helper()
	s := "apiVersion: v1\nkind: Config\ncurrent-context: " + current + "\nclusters:\n"
	for ctx, server := range contexts {
		s += "- name: " + ctx + "\n  cluster:\n    server: " + server + "\n"
	}
	s += "users:\n- name: u\n  user:\n    token: t\ncontexts:\n"
	for ctx := range contexts {
		s += "- name: " + ctx + "\n  context:\n    cluster: " + ctx + "\n    user: u\n"
	}
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(s), 0o600))
	return path
}

// Issue 10: deployflow finds its cluster as kubectl does — KUBECONFIG (a
// list), ~/.kube/config, --kubeconfig, --context — instead of refusing to
// start without KUBECONFIG.
func TestRESTConfigFollowsKubectlsLoadingRules(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".kube"), 0o755))
	kubeconfig(t, filepath.Join(home, ".kube"), "config", "dev", map[string]string{
		"dev": "https://dev.example:6443", "prod": "https://prod.example:6443"})

	server := func(explicit, context string) string {
		t.Helper()
		cfg, err := RESTConfig(explicit, context, "test")
		require.NoError(t, err)
		assert.Equal(t, "test", cfg.UserAgent)
		return cfg.Host
	}
	assert.Equal(t, "https://dev.example:6443", server("", ""), "~/.kube/config, current context")
	assert.Equal(t, "https://prod.example:6443", server("", "prod"), "--context")

	other := t.TempDir()
	a := kubeconfig(t, other, "a", "a1", map[string]string{"a1": "https://a1.example"})
	b := kubeconfig(t, other, "b", "b1", map[string]string{"b1": "https://b1.example"})
	t.Setenv("KUBECONFIG", a+string(os.PathListSeparator)+b)
	assert.Equal(t, "https://a1.example", server("", ""), "KUBECONFIG beats ~/.kube/config; the first file's current context")
	assert.Equal(t, "https://b1.example", server("", "b1"), "KUBECONFIG files are merged")
	assert.Equal(t, "https://b1.example", server(b, ""), "--kubeconfig beats KUBECONFIG")

	_, err := RESTConfig("", "nope", "test")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--context nope")
	assert.Contains(t, err.Error(), `context "nope" does not exist`)
}

func TestRESTConfigWithNothingSaysWhereItLooked(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := RESTConfig("", "", "test")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set KUBECONFIG or --kubeconfig")
}
