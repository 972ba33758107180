package activities

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An HTTP check's result is the status code, or a JSON field; what cannot
// be read has no value (inconclusive), an unreachable URL is an error.
func TestMeasureHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/json":
			_, _ = w.Write([]byte(`{"checks": {"errorRate": 0.02, "ok": true, "name": "web"}}`))
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	a := &Activities{}
	value := func(m *Measurement) any {
		if m.Value == nil {
			return nil
		}
		return *m.Value
	}
	for _, c := range []struct {
		path, field string
		want        any
		message     string
	}{
		{"/", "", 200.0, "status 200"},
		{"/down", "", 503.0, "status 503"},
		{"/json", "checks.errorRate", 0.02, "checks.errorRate = 0.02"},
		{"/json", "checks.ok", 1.0, "checks.ok = 1"},
		{"/json", "checks.name", nil, "status 200: checks.name is web, not a number or a boolean"},
		{"/json", "checks.missing", nil, "status 200: no field checks.missing in the answer"},
		{"/", "checks.ok", nil, "status 200, not JSON"},
	} {
		m, err := a.MeasureHTTP(context.Background(), HTTPCheckInput{URL: srv.URL + c.path, JSONField: c.field})
		require.NoError(t, err, c.path)
		assert.Equal(t, c.want, value(m), c.path+" "+c.field)
		assert.Contains(t, m.Message, c.message)
	}
	srv.Close()
	_, err := a.MeasureHTTP(context.Background(), HTTPCheckInput{URL: srv.URL})
	assert.Error(t, err, "an unreachable URL is retried")
}
