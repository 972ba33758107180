package codec

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// The codec server (issue 37.3): Temporal's remote codec protocol (POST
// /encode and /decode, payloads as JSON) over the codec, for the Temporal
// UI (its codec endpoint setting) and the temporal CLI (--codec-endpoint,
// --codec-auth). Only an operator who shows one of the server's tokens
// gets anything decoded: as a header (Authorization: Bearer <token>: the
// temporal CLI, or the UI's "pass access token" where the UI signs in with
// OIDC), or as the session cookie /login sets once the token is typed
// there (the UI's "include cross-origin credentials", where it does not).
// The UI's origin is allowed by CORS.

// MaxRequestBytes bounds one request's payloads.
const MaxRequestBytes = 8 << 20

// ServerOptions are who the codec server answers.
type ServerOptions struct {
	// Tokens are the bearer tokens it accepts (at least one).
	Tokens []string
	// Origins are the browser origins allowed to call it (the Temporal
	// UI's, e.g. http://127.0.0.1:8233); none: no browser.
	Origins []string
}

// Handler is the codec server's handler for c.
func Handler(c *Codec, o ServerOptions) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && slices.Contains(o.Origins, origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions { // a preflight carries no credentials
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/login") {
			login(w, r, o.Tokens)
			return
		}
		if !authorized(r.Header.Get("Authorization"), o.Tokens) && !signedIn(r, o.Tokens) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="deployflow codec"`)
			http.Error(w, "a codec server token is required: Authorization: Bearer <token>, or sign in at /login", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || !(strings.HasSuffix(r.URL.Path, "/encode") || strings.HasSuffix(r.URL.Path, "/decode")) {
			http.Error(w, "POST /encode or /decode", http.StatusNotFound)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		inner.ServeHTTP(w, r)
	})
}

// authorized reports whether header carries one of tokens, compared in
// constant time.
func authorized(header string, tokens []string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || got == "" {
		return false
	}
	match := 0
	for _, t := range tokens {
		if t != "" {
			match |= subtle.ConstantTimeCompare([]byte(got), []byte(t))
		}
	}
	return match == 1
}

// SessionCookie is the cookie /login sets: a value derived from the token
// typed there (HMAC-SHA256), never the token itself, HttpOnly and
// SameSite=Strict, so only pages of the codec server's own site (the
// Temporal UI served beside it) send it.
const SessionCookie = "deployflow_codec"

// maxLoginBytes bounds the sign-in form.
const maxLoginBytes = 4 << 10

// session is the cookie value of token.
func session(token string) string {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("deployflow codec session"))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// signedIn reports whether r carries the session cookie of one of tokens,
// compared in constant time.
func signedIn(r *http.Request, tokens []string) bool {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return false
	}
	match := 0
	for _, t := range tokens {
		if t != "" {
			match |= subtle.ConstantTimeCompare([]byte(c.Value), []byte(session(t)))
		}
	}
	return match == 1
}

// loginPage is the sign-in form: one token field.
const loginPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>deployflow codec server</title></head>
<body><h1>deployflow codec server</h1>
<p>%s</p>
<form method="post" action="login"><label>Token <input type="password" name="token" autocomplete="off" autofocus></label>
<button type="submit">Sign in</button></form>
<p>Then, in the Temporal UI's codec server settings, give this server's address and turn on "include cross-origin credentials".</p>
</body></html>
`

// login shows the sign-in form (GET) or takes a token from it (POST): one
// of the server's tokens sets the session cookie, any other is refused.
func login(w http.ResponseWriter, r *http.Request, tokens []string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	switch r.Method {
	case http.MethodGet:
		fmt.Fprintf(w, loginPage, "Sign in with a codec server token to see decoded payloads in the Temporal UI.")
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginBytes)
		token := ""
		if err := r.ParseForm(); err == nil {
			token = r.PostForm.Get("token")
		}
		if !authorized("Bearer "+token, tokens) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, loginPage, "That is not one of this server's tokens.")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: session(token), Path: "/",
			HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
		fmt.Fprintf(w, loginPage, "Signed in: the Temporal UI decodes through this server now.")
	default:
		http.Error(w, "GET or POST /login", http.StatusMethodNotAllowed)
	}
}
