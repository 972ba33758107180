package app

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// Guards --profiling: Go's profiles are served only when the operator
// asks for them (they show the process's internals to whoever reaches
// the metrics address), and then the heap profile the bench reads is
// there.
func TestProfilesAreServedOnlyWithProfiling(t *testing.T) {
	get := func(h http.Handler, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	off := NewHTTPHandler(prometheus.NewRegistry(), NewHealth(nil), false)
	require.Equal(t, http.StatusNotFound, get(off, "/debug/pprof/heap").Code)
	require.Equal(t, http.StatusOK, get(off, "/healthz").Code)

	on := NewHTTPHandler(prometheus.NewRegistry(), NewHealth(nil), true)
	heap := get(on, "/debug/pprof/heap?gc=1")
	require.Equal(t, http.StatusOK, heap.Code)
	require.NotEmpty(t, heap.Body.Bytes(), "a heap profile")
	require.Contains(t, get(on, "/debug/pprof/").Body.String(), "goroutine")
}
