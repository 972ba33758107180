package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
)

const marker = "s3cr3t-marker-4711"

func keys(t *testing.T, active string, ids ...string) *Keys {
	t.Helper()
	k := &Keys{Active: active, Keys: map[string][]byte{}}
	for i, id := range ids {
		k.Keys[id] = bytes.Repeat([]byte{byte(i + 1)}, KeySize)
	}
	return k
}

func codecOf(t *testing.T, k *Keys) *Codec {
	t.Helper()
	c, err := New(k)
	require.NoError(t, err)
	return c
}

// A payload encrypted by the codec holds no plain text, names its key,
// and decodes to what was written; a plain payload (a deploy typed into
// the UI's form) decodes as it is.
func TestThePayloadCodecEncryptsAndDecodes(t *testing.T) {
	c := codecOf(t, keys(t, "k1", "k1"))
	dc := c.DataConverter()
	p, err := dc.ToPayload(map[string]string{"password": marker})
	require.NoError(t, err)
	assert.Equal(t, EncodingEncrypted, string(p.Metadata[converter.MetadataEncoding]))
	assert.Equal(t, "k1", string(p.Metadata[MetadataKeyID]))
	raw, _ := protojson.Marshal(p)
	assert.NotContains(t, string(raw), marker)
	var back map[string]string
	require.NoError(t, dc.FromPayload(p, &back))
	assert.Equal(t, marker, back["password"])

	plain, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"typed": "by hand"})
	require.NoError(t, err)
	require.NoError(t, dc.FromPayload(plain, &back))
	assert.Equal(t, "by hand", back["typed"])
}

// Keys rotate: what the old key encrypted still decodes once a new key
// is active, and new writes use the new key. A payload of a key the
// process lacks, or whose key ID was swapped, does not decode.
func TestKeysRotate(t *testing.T) {
	old := codecOf(t, keys(t, "k1", "k1"))
	p, err := old.Encode([]*commonpb.Payload{{Data: []byte(marker)}})
	require.NoError(t, err)

	rotated := codecOf(t, keys(t, "k2", "k1", "k2"))
	dec, err := rotated.Decode(p)
	require.NoError(t, err)
	assert.Equal(t, marker, string(dec[0].Data))
	enc, err := rotated.Encode(dec)
	require.NoError(t, err)
	assert.Equal(t, "k2", string(enc[0].Metadata[MetadataKeyID]))

	onlyNew := codecOf(t, &Keys{Active: "k2", Keys: map[string][]byte{"k2": rotated.keyOf(t, "k2")}})
	_, err = onlyNew.Decode(p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `encrypted with key "k1", which this process does not hold`)

	swapped := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(EncodingEncrypted), MetadataKeyID: []byte("k2")}, Data: p[0].Data}
	_, err = rotated.Decode([]*commonpb.Payload{swapped})
	assert.Error(t, err, "the key ID is authenticated")
}

func (c *Codec) keyOf(t *testing.T, id string) []byte {
	t.Helper()
	// the test's keys are the index's byte repeated
	for i, k := range []string{"k1", "k2"} {
		if k == id {
			return bytes.Repeat([]byte{byte(i + 1)}, KeySize)
		}
	}
	t.Fatalf("no key %s", id)
	return nil
}

// The keys file is checked, and its errors never quote a key.
func TestKeysFileIsValidated(t *testing.T) {
	fresh, err := NewKey("2026-11")
	require.NoError(t, err)
	k, err := ParseKeys(fresh)
	require.NoError(t, err)
	assert.Equal(t, "2026-11", k.Active)
	assert.Len(t, k.Keys["2026-11"], KeySize)

	short := base64.StdEncoding.EncodeToString([]byte(marker))
	for _, c := range []struct{ file, want string }{
		{`not json`, `want JSON {"active"`},
		{`{"active": "a", "keys": {"a": "` + short + `"}}`, "key a: want the base64 of 32 random bytes"},
		{`{"active": "b", "keys": {"a": "` + base64.StdEncoding.EncodeToString(make([]byte, 32)) + `"}}`, `active "b" names no key of the file (keys: [a])`},
		{`{"active": "a b", "keys": {"a b": "x"}}`, `key ID "a b": use 1 to 64 letters`},
	} {
		_, err := ParseKeys([]byte(c.file))
		require.Error(t, err, c.file)
		assert.Contains(t, err.Error(), c.want)
		assert.NotContains(t, err.Error(), short)
	}
}

// codecServer is a codec server accepting the token tok-1 from the UI's
// origin, and a /decode request body holding the marker, encrypted.
func codecServer(t *testing.T) (*httptest.Server, []byte) {
	c := codecOf(t, keys(t, "k1", "k1"))
	enc, err := c.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"` + marker + `"`)}})
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	require.NoError(t, err)
	return httptest.NewServer(Handler(c, ServerOptions{Tokens: []string{"tok-1"}, Origins: []string{"http://127.0.0.1:8233"}})), body
}

// The codec server decodes only for a caller with a token, answers the
// UI's CORS preflight for its origin only, and bounds a request.
func TestTheCodecServerDecodesForAnAuthenticatedOperator(t *testing.T) {
	srv, body := codecServer(t)
	defer srv.Close()
	post := func(auth string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		req.Header.Set("Origin", "http://127.0.0.1:8233")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, out := post("Bearer tok-1")
	require.Equal(t, http.StatusOK, resp.StatusCode, out)
	var got struct{ Payloads []struct{ Data string } }
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	data, _ := base64.StdEncoding.DecodeString(got.Payloads[0].Data)
	assert.Equal(t, `"`+marker+`"`, string(data))
	assert.Equal(t, "http://127.0.0.1:8233", resp.Header.Get("Access-Control-Allow-Origin"))

	for _, auth := range []string{"", "Bearer", "Bearer tok-2", "tok-1"} {
		resp, out := post(auth)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "authorization %q", auth)
		assert.NotContains(t, out, marker)
	}

	pre, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
	pre.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(pre)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "another origin is not allowed")

	big := bytes.Repeat([]byte("x"), MaxRequestBytes+1)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(big))
	req.Header.Set("Authorization", "Bearer tok-1")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// An operator whose UI has no access token to pass (no OIDC) signs in at
// /login with a token: the session cookie it gets decodes, and is neither
// the token nor given for a wrong one; a forged cookie decodes nothing.
func TestTheCodecServerSignsAnOperatorInWithACookie(t *testing.T) {
	srv, body := codecServer(t)
	defer srv.Close()
	decode := func(cookie *http.Cookie) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	signIn := func(token string) *http.Response {
		resp, err := http.PostForm(srv.URL+"/login", url.Values{"token": {token}})
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}

	page, err := http.Get(srv.URL + "/login")
	require.NoError(t, err)
	form, _ := io.ReadAll(page.Body)
	page.Body.Close()
	assert.Contains(t, string(form), `name="token"`)

	wrong := signIn("tok-2")
	assert.Equal(t, http.StatusUnauthorized, wrong.StatusCode)
	assert.Empty(t, wrong.Cookies())

	ok := signIn("tok-1")
	require.Equal(t, http.StatusOK, ok.StatusCode)
	require.Len(t, ok.Cookies(), 1)
	cookie := ok.Cookies()[0]
	assert.Equal(t, SessionCookie, cookie.Name)
	assert.True(t, cookie.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
	assert.NotContains(t, cookie.Value, "tok-1", "the cookie is not the token")

	status, out := decode(cookie)
	require.Equal(t, http.StatusOK, status, out)
	assert.Contains(t, out, base64.StdEncoding.EncodeToString([]byte(`"`+marker+`"`)))
	for _, forged := range []*http.Cookie{nil, {Name: SessionCookie, Value: "tok-1"}, {Name: SessionCookie, Value: session("tok-2")}} {
		status, out := decode(forged)
		assert.Equal(t, http.StatusUnauthorized, status, "cookie %v", forged)
		assert.NotContains(t, out, marker)
	}
}
