package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/internal/codec"
)

// Issue 37.3: `deployflow codec-key` writes a keys file the codec takes;
// --rotate adds a new active key and keeps the old one (what it encrypted
// still decodes).
func TestCodecKeyMakesAndRotatesAKeysFile(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := runCLI("codec-key", "--id", "2026-11")
	require.Equal(t, 0, code, stderr)
	first := filepath.Join(dir, "keys.json")
	require.NoError(t, os.WriteFile(first, []byte(out), 0o600))
	k, err := codec.LoadKeys(first)
	require.NoError(t, err)
	assert.Equal(t, "2026-11", k.Active)

	code, out, stderr = runCLI("codec-key", "--id", "2027-05", "--rotate", first)
	require.Equal(t, 0, code, stderr)
	rotated, err := codec.ParseKeys([]byte(out))
	require.NoError(t, err)
	assert.Equal(t, "2027-05", rotated.Active)
	assert.Equal(t, k.Keys["2026-11"], rotated.Keys["2026-11"], "the old key is kept")

	code, _, stderr = runCLI("codec-key", "--id", "2026-11", "--rotate", first)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "the file has a key of that ID already")
}

// `deployflow codec-server` serves /decode to a caller with a token from
// --token-file, and refuses one without; it refuses to start without keys
// or tokens.
func TestCodecServerCommandServesAuthenticatedOperators(t *testing.T) {
	dir := t.TempDir()
	_, keys, _ := runCLI("codec-key", "--id", "k1")
	keysFile, tokens, ready := filepath.Join(dir, "keys.json"), filepath.Join(dir, "tokens"), filepath.Join(dir, "addr")
	require.NoError(t, os.WriteFile(keysFile, []byte(keys), 0o600))
	require.NoError(t, os.WriteFile(tokens, []byte("# operators\noperator-token-0123456789\n"), 0o600))

	code, _, stderr := runCLI("codec-server", "--codec-keys-file", keysFile)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--token-file: give the file of the tokens")
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("abc\n"), 0o600))
	code, _, stderr = runCLI("codec-server", "--codec-keys-file", keysFile, "--token-file", short)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "too short to guess-proof")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		var out, errb bytes.Buffer
		done <- run(ctx, []string{"codec-server", "--listen", "127.0.0.1:0", "--codec-keys-file", keysFile, "--token-file", tokens, "--ready-file", ready}, &out, &errb)
	}()
	var addr []byte
	require.Eventually(t, func() bool { addr, _ = os.ReadFile(ready); return len(addr) > 0 }, 10*time.Second, 20*time.Millisecond)
	post := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+string(addr)+"/decode", bytes.NewReader([]byte(`{"payloads":[]}`)))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, post("operator-token-0123456789"))
	assert.Equal(t, http.StatusUnauthorized, post(""))
	cancel()
	assert.Equal(t, 0, <-done)
}
