package workflows_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// apiRequest is one request the worker's activities sent the API server.
type apiRequest struct {
	method, path, query string
	code                int
}

func (r apiRequest) String() string {
	return fmt.Sprintf("%s %s?%s → %d", r.method, r.path, r.query, r.code)
}

// apiRecorder records every request of a client built from cfg.
type apiRecorder struct {
	mu   sync.Mutex
	reqs []apiRequest
}

func (rec *apiRecorder) client(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			r := apiRequest{method: req.Method, path: req.URL.Path, query: req.URL.RawQuery}
			if resp != nil {
				r.code = resp.StatusCode
			}
			rec.mu.Lock()
			rec.reqs = append(rec.reqs, r)
			rec.mu.Unlock()
			return resp, err
		})
	})
	kc, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return kc
}

func (rec *apiRecorder) all() []apiRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]apiRequest(nil), rec.reqs...)
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Issue 22 (apiserver requests per deploy, target: no more than 32): a
// first deploy asks the API server nothing whose answer it already has.
// Before, its plan dry-ran the Deployment into the namespace that did not
// exist yet (answered 404) and listed the ReplicaSets there (none), and
// its apply read the namespace again right after ensuring it, for its
// owner. What the user sees is unchanged: the deploy is Active and its
// plan's classes are what they were.
func TestAFirstDeployAsksTheAPIServerOnlyWhatItCannotKnow(t *testing.T) {
	rec := &apiRecorder{}
	cfg := testenv.Get(t).RESTConfig
	dt := newDeployTestWith(t, func(a *activities.Activities) { a.Kube = rec.client(t, cfg) })
	ns := manifest.Namespace(dt.lease)
	one := int32(1)
	dt.deploy(manifest.Manifest{Lease: dt.lease, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &one,
		Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{dt.lease + ".apps.example.com"}}}}}}}})
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, "last error: %s", st.LastError)
	assert.Equal(t, map[string]string{"web": activities.ChangeRollout}, st.Classes)

	reqs := rec.all()
	var seen []string
	created := -1
	for i, r := range reqs {
		seen = append(seen, r.String())
		if r.method == http.MethodPost && r.path == "/api/v1/namespaces" && r.code == http.StatusCreated {
			created = i
		}
	}
	require.GreaterOrEqual(t, created, 0, "the deploy created its namespace:\n%s", strings.Join(seen, "\n"))
	for i, r := range reqs {
		if r.code == http.StatusNotFound && !(r.method == http.MethodGet && r.path == "/api/v1/namespaces/"+ns) && i < created {
			t.Errorf("request %d asked about what the missing namespace cannot hold: %s", i+1, r)
		}
		if i < created && strings.HasSuffix(r.path, "/namespaces/"+ns+"/replicasets") {
			t.Errorf("request %d listed ReplicaSets before their namespace existed: %s", i+1, r)
		}
	}
	// From the namespace's creation to the apply of the lease's objects,
	// nothing reads the namespace again.
	for i := created + 1; i < len(reqs); i++ {
		r := reqs[i]
		if r.method == http.MethodPatch && strings.Contains(r.path, "/namespaces/"+ns+"/services/") {
			break
		}
		if r.method == http.MethodGet && r.path == "/api/v1/namespaces/"+ns {
			t.Errorf("request %d read the namespace the deploy had just ensured: %s", i+1, r)
		}
	}
	if t.Failed() {
		t.Logf("the deploy's requests:\n%s", strings.Join(seen, "\n"))
	}
}
