package codec

import (
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// The codec server (issue 37.3): Temporal's remote codec protocol (POST
// /encode and /decode, payloads as JSON) over the codec, for the Temporal
// UI (its codec endpoint setting, with "pass access token") and the
// temporal CLI (--codec-endpoint, --codec-auth). Only an operator who
// sends one of the server's tokens (Authorization: Bearer <token>) gets
// anything decoded; the UI's origin is allowed by CORS.

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
		if !authorized(r.Header.Get("Authorization"), o.Tokens) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="deployflow codec"`)
			http.Error(w, "a codec server token is required: Authorization: Bearer <token>", http.StatusUnauthorized)
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
