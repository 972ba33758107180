package workflows_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// Issue 38.2: the stack's Gateway (Traefik, the Gateway API's standard
// channel) routes a hostname to a lease's Service: an HTTPRoute parented
// to the stack's Gateway is Accepted with its references resolved, for
// its generation, and a request for its hostname through the Gateway is
// answered by a pod of the Service's version.
func TestTheGatewayRoutesAHostnameToAPodOfTheService(t *testing.T) {
	dataPlane(t)
	dt := newDeployTest(t)
	ns := manifest.Namespace(dt.lease)
	host := "web." + dt.lease + ".example.com"
	dt.deploy(web(dt.lease, "web", "nginx:1.26", 2, host))
	dt.waitRevision(dt.lease, 1)

	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": devstack.GatewayName, "namespace": devstack.GatewayNamespace, "sectionName": devstack.GatewayListener}},
			"hostnames":  []any{host},
			"rules":      []any{map[string]any{"backendRefs": []any{map[string]any{"name": "web", "port": int64(80)}}}},
		},
	}}
	ctx := context.Background()
	_, err := dt.env.Dynamic.Resource(devstack.HTTPRoutes).Namespace(ns).Create(ctx, route, metav1.CreateOptions{})
	require.NoError(t, err)
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the Gateway never accepted the route", func() (bool, string) {
		got, err := dt.env.Dynamic.Resource(devstack.HTTPRoutes).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return routeAccepted(got), fmt.Sprintf("%v", got.Object["status"])
	})

	client := &http.Client{Timeout: 5 * time.Second}
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the Gateway never answered for "+host, func() (bool, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+devstack.GatewayAddress+"/", nil)
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		pod := resp.Header.Get(devstack.HeaderPod)
		return resp.StatusCode == http.StatusOK && resp.Header.Get(devstack.HeaderImage) == "nginx:1.26" && strings.HasPrefix(pod, ns+"/web-"),
			fmt.Sprintf("%d %s %s", resp.StatusCode, pod, body)
	})
}

// routeAccepted reports whether every parent of an HTTPRoute's status says
// Accepted and ResolvedRefs for the route's current generation.
func routeAccepted(route *unstructured.Unstructured) bool {
	parents, _, _ := unstructured.NestedSlice(route.Object, "status", "parents")
	if len(parents) == 0 {
		return false
	}
	for _, p := range parents {
		conds, _, _ := unstructured.NestedSlice(p.(map[string]any), "conditions")
		ok := map[string]bool{}
		for _, c := range conds {
			c := c.(map[string]any)
			gen, _, _ := unstructured.NestedInt64(c, "observedGeneration")
			if c["status"] == "True" && gen == route.GetGeneration() {
				ok[c["type"].(string)] = true
			}
		}
		if !ok["Accepted"] || !ok["ResolvedRefs"] {
			return false
		}
	}
	return true
}
