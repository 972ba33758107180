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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/deployflow/deployflow/activities"
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

// Issues 38.2 and 38.3: with --routing gateway, a lease's hostname is an
// HTTPRoute on the operator's Gateway (the stack's: Traefik, the Gateway
// API's standard channel), and the deploy's apply returns only once the
// Gateway accepted it for its generation: a request for the hostname
// through the Gateway is then answered by a pod of the deployed version,
// after an update by a pod of the new one, and a hostname the manifest
// drops has its route pruned. No Ingress is written.
func TestAHostnameIsAnHTTPRouteOnTheGatewayAnsweredByItsVersion(t *testing.T) {
	dataPlane(t)
	gw := manifest.GatewayRef{Namespace: devstack.GatewayNamespace, Name: devstack.GatewayName, Section: devstack.GatewayListener}
	dt := newDeployTestWith(t, func(a *activities.Activities) {
		a.Gateway = &activities.GatewayRouting{Ref: gw, Dynamic: testenv.Get(t).Dynamic}
	})
	ns := manifest.Namespace(dt.lease)
	host := "web." + dt.lease + ".example.com"
	ctx := context.Background()
	routes := dt.env.Dynamic.Resource(activities.HTTPRouteResource).Namespace(ns)
	client := &http.Client{Timeout: 5 * time.Second}
	// answeredBy is the image of the pod that answers a request for host
	// through the Gateway (the route is accepted when the deploy ends; the
	// proxy serves it a moment later).
	answeredBy := func(image string) {
		testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "the Gateway never answered "+host+" from "+image, func() (bool, string) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+devstack.GatewayAddress+"/", nil)
			req.Host = host
			resp, err := client.Do(req)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			pod := resp.Header.Get(devstack.HeaderPod)
			return resp.StatusCode == http.StatusOK && resp.Header.Get(devstack.HeaderImage) == image && strings.HasPrefix(pod, ns+"/web-"),
				fmt.Sprintf("%d %s %s", resp.StatusCode, pod, body)
		})
	}

	dt.deploy(web(dt.lease, "web", "nginx:1.26", 2, host))
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, "Active", string(st.Phase), st.LastError)
	route, err := routes.Get(ctx, manifest.RouteName("web", 80), metav1.GetOptions{})
	require.NoError(t, err)
	ok, why := activities.RouteAccepted(route, gw)
	assert.True(t, ok, "the deploy ended with its route accepted: %s", why)
	hosts, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
	assert.Equal(t, []string{host}, hosts)
	_, err = dt.env.Kube.NetworkingV1().Ingresses(ns).Get(ctx, manifest.IngressName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no Ingress with gateway routing: %v", err)
	answeredBy("nginx:1.26")

	dt.deploy(web(dt.lease, "web", "nginx:1.27", 2, host))
	dt.waitRevision(dt.lease, 2)
	answeredBy("nginx:1.27")

	dt.deploy(web(dt.lease, "web", "nginx:1.27", 2))
	dt.waitRevision(dt.lease, 3)
	_, err = routes.Get(ctx, manifest.RouteName("web", 80), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the dropped hostname's route is pruned: %v", err)
}
