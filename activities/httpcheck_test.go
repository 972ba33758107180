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
	a := &Activities{HTTPCheckAllow: []string{"127.0.0.1/32"}}
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
	m, err := (&Activities{}).MeasureHTTP(context.Background(), HTTPCheckInput{Namespace: "lease-a", URL: srv.URL})
	require.NoError(t, err)
	assert.Nil(t, m.Value, "a host the worker does not allow is not checked")
	assert.Contains(t, m.Message, "not checked: 127.0.0.1 is not one of the lease's Services (<service>.lease-a)")
	srv.Close()
	_, err = a.MeasureHTTP(context.Background(), HTTPCheckInput{URL: srv.URL})
	assert.Error(t, err, "an unreachable URL is retried")
}

// A lease's HTTP checks reach its own Services and what the worker allows,
// nothing else (the cloud's metadata address, another lease's Services).
func TestHTTPCheckAllowed(t *testing.T) {
	allow := []string{"*.monitoring.svc.cluster.local", "10.1.0.0/16", "status.example.com"}
	for _, c := range []struct {
		host string
		want bool
	}{
		{"web-preview.lease-a", true},
		{"web-preview.lease-a.svc", true},
		{"web-preview.lease-a.svc.cluster.local", true},
		{"WEB.lease-a.svc.cluster.local.", true},
		{"web.lease-b.svc.cluster.local", false},
		{"web.lease-a.example.com", false},
		{"lease-a", false},
		{"prometheus.monitoring.svc.cluster.local", true},
		{"10.1.2.3", true},
		{"10.2.0.1", false},
		{"169.254.169.254", false},
		{"status.example.com", true},
		{"evil-status.example.com", false},
		{"localhost", false},
	} {
		assert.Equal(t, c.want, HTTPCheckAllowed(c.host, "lease-a", allow), c.host)
	}
}
