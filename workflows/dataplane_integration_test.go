package workflows_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// dataPlane skips a test that needs the stack's data plane where it is
// off (outside CI: it needs CAP_NET_ADMIN for its route), and fails it in
// CI.
func dataPlane(t *testing.T) {
	t.Helper()
	if on, why := devstack.DataPlaneOn(context.Background()); !on {
		if os.Getenv("CI") != "" {
			t.Fatalf("the local stack's data plane is off: %s", why)
		}
		t.Skipf("the local stack's data plane is off: %s", why)
	}
}

// Issue 38.1: a request to a Service's endpoints reaches a pod of the
// version it belongs to. A lease's web (nginx:1.26, two replicas) answers
// at every address of its Service's EndpointSlices as the pod the slice
// names, with its image; after an update to nginx:1.27 every endpoint
// answers as a new pod, of 1.27, and the old pods' addresses answer no
// more as 1.26.
func TestAServicesEndpointsAnswerAsThePodsOfTheirVersion(t *testing.T) {
	dataPlane(t)
	dt := newDeployTest(t)
	ns := manifest.Namespace(dt.lease)
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(addr string) (pod, image string, err error) {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			return "", "", err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Header.Get(devstack.HeaderPod), resp.Header.Get(devstack.HeaderImage), nil
	}
	// endpoints are the Service's ready endpoints: ip:port and the pod.
	endpoints := func() map[string]string {
		slices, err := dt.env.Kube.DiscoveryV1().EndpointSlices(ns).List(context.Background(),
			metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		require.NoError(t, err)
		out := map[string]string{}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || !*e.Conditions.Ready || e.TargetRef == nil {
					continue
				}
				for _, p := range s.Ports {
					out[net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(*p.Port)))] = ns + "/" + e.TargetRef.Name
				}
			}
		}
		return out
	}
	// answersAs waits until the Service has want endpoints, each answering
	// as its pod, of image.
	answersAs := func(image string, want int) map[string]string {
		var eps map[string]string
		testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the Service's endpoints never answered as "+image, func() (bool, string) {
			eps = endpoints()
			if len(eps) != want {
				return false, fmt.Sprintf("%d ready endpoints: %v", len(eps), eps)
			}
			for addr, pod := range eps {
				got, img, err := get(addr)
				if err != nil || got != pod || img != image {
					return false, fmt.Sprintf("%s answered as %q (%q), want %s (%s): %v", addr, got, img, pod, image, err)
				}
			}
			return true, ""
		})
		return eps
	}

	dt.deploy(web(dt.lease, "web", "nginx:1.26", 2, "web."+dt.lease+".example.com"))
	dt.waitRevision(dt.lease, 1)
	old := answersAs("nginx:1.26", 2)

	dt.deploy(web(dt.lease, "web", "nginx:1.27", 2, "web."+dt.lease+".example.com"))
	dt.waitRevision(dt.lease, 2)
	current := answersAs("nginx:1.27", 2)
	for addr, pod := range old {
		if _, reused := current[addr]; reused {
			continue // the IP went to a new pod: it answers as that one
		}
		_, img, err := get(addr)
		assert.True(t, err != nil || img != "nginx:1.26", "%s (%s, gone) still answers as nginx:1.26", addr, pod)
	}

}
