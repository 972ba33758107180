package workflows_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 38.1: a request to a Service's endpoints reaches a pod of the
// version it belongs to. A lease's web (nginx:1.26, two replicas) answers
// at every address of its Service's EndpointSlices as the pod the slice
// names, with its image; after an update to nginx:1.27 every endpoint
// answers as a new pod, of 1.27, and the old pods' addresses answer no
// more as 1.26.
func TestAServicesEndpointsAnswerAsThePodsOfTheirVersion(t *testing.T) {
	testenv.DataPlane(t)
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
	dt, gw := throughTheStacksGateway(t)
	ns := manifest.Namespace(dt.lease)
	host := "web." + dt.lease + ".example.com"
	ctx := context.Background()
	routes := dt.env.Dynamic.Resource(activities.HTTPRouteResource).Namespace(ns)
	client := &http.Client{Timeout: 5 * time.Second}
	// answeredBy is the image of the pod that answers a request for host
	// through the Gateway (the route is accepted when the deploy ends; the
	// proxy serves it a moment later).
	answeredBy := func(image string) {
		testenv.Eventually(t, 2*time.Minute, 100*time.Millisecond, "the Gateway never answered "+host+" from "+image, func() (bool, string) {
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

// Issue 38.4: with --routing gateway, a canary's setWeight is the weight
// of its HTTPRoute's backends, the stable Service (pinned to the running
// version's pods) and the canary Service (pinned to the new version's):
// each step ends once the Gateway accepted the route at the weight, and
// then the requests through the Gateway follow it. An abort sends every
// request back to the stable version before its pods scale back up. No
// request fails meanwhile.
func TestACanarysWeightIsTheShareOfRequestsThroughTheGateway(t *testing.T) {
	dt, gw := throughTheStacksGateway(t)
	ns := manifest.Namespace(dt.lease)
	host := "web." + dt.lease + ".example.com"
	ctx := context.Background()
	routes := dt.env.Dynamic.Resource(activities.HTTPRouteResource).Namespace(ns)
	canary := func(image string) manifest.Manifest {
		m := web(dt.lease, "web", image, 4, host)
		delay := int32(1) // the stack's Traefik applies a weight within 100ms of accepting it
		m.Services[0].Rollout = &manifest.Rollout{Strategy: manifest.StrategyCanary, ScaleDownDelaySeconds: &delay,
			Steps: []manifest.CanaryStep{weight(25), pause(""), weight(50), pause("")}}
		return m
	}
	shares := (&throughGateway{t: t, host: host}).shares
	// weighted waits until the route sends canaryWeight percent to the
	// canary Service, accepted by the Gateway for that generation.
	// routeAt says whether the route sends canaryWeight percent to the
	// canary Service, accepted by the Gateway for that generation.
	routeAt := func(canaryWeight int64) (bool, string) {
		r, err := routes.Get(ctx, manifest.RouteName("web", 80), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := routeBackends(r)
		ok, why := activities.RouteAccepted(r, gw)
		want := fmt.Sprintf("web-stable=%d,web-canary=%d", 100-canaryWeight, canaryWeight)
		return ok && got == want, fmt.Sprintf("%s (%s)", got, why)
	}
	weighted := func(canaryWeight int64) {
		testenv.Eventually(t, 3*time.Minute, 200*time.Millisecond, fmt.Sprintf("the route never sent %d%% to the canary", canaryWeight), func() (bool, string) {
			return routeAt(canaryWeight)
		})
	}
	update := func(name string, args ...any) {
		require.NoError(t, dt.env.Update(ctx, client.UpdateWorkflowOptions{WorkflowID: api.RolloutWorkflowID(ns, "web"),
			UpdateName: name, Args: args, WaitForStage: client.WorkflowUpdateStageCompleted}, nil))
	}

	dt.deploy(canary("nginx:1.26"))
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	weighted(0)
	(&throughGateway{t: t, host: host}).servedBy("nginx:1.26")
	assert.Equal(t, map[string]int{"nginx:1.26": 100}, shares(100), "every request to the one version")

	// serving is how long after the route's acceptance at weight w the
	// Gateway's answers show it: 20 requests in a row, w percent of them
	// (within 10 points) from the canary (Traefik applies what it
	// accepted moments later).
	serving := func(w int64) time.Duration {
		began := time.Now()
		testenv.Eventually(t, 10*time.Second, 0, fmt.Sprintf("the Gateway never served %d%% from the canary", w), func() (bool, string) {
			got := shares(20)
			share := int64(100 * got["nginx:1.27"] / 20)
			return got["failed"] == 0 && share >= w-10 && share <= w+10, fmt.Sprint(got)
		})
		return time.Since(began)
	}

	dt.deploy(canary("nginx:1.27"))
	for _, w := range []int64{25, 50} {
		weighted(w)
		t.Logf("setWeight %d%%: served %s after the route was accepted", w, serving(w).Round(time.Millisecond))
		got := shares(400)
		assert.Zero(t, got["failed"], "no request fails at %d%%: %v", w, got)
		share := 100 * float64(got["nginx:1.27"]) / 400
		assert.InDelta(t, float64(w), share, 5, "at setWeight %d%%, %.1f%% of 400 requests answered by the canary: %v", w, share, got)
		if w == 25 {
			update(api.UpdatePromote, api.PromoteRequest{})
		}
	}

	// The abort: every request to the stable version first, done when the
	// abort is answered (a worker killed right after leaves none on the
	// canary).
	update(api.UpdateAbort)
	ok, got := routeAt(0)
	assert.True(t, ok, "the abort answered, the route sends nothing to the canary: %s", got)
	testenv.Eventually(t, 10*time.Second, 0, "after the abort, every request to the stable version", func() (bool, string) {
		got := shares(20)
		return got["nginx:1.26"] == 20, fmt.Sprint(got)
	})
	assert.Equal(t, map[string]int{"nginx:1.26": 100}, shares(100), "after the abort, every request to the stable version")
	dt.waitRevision(dt.lease, 2)
	assert.Equal(t, map[string]int{"nginx:1.26": 100}, shares(100), "the stable version, back at its replicas")

	// From 0 to 100 (promoted past its steps) under a steady stream of
	// requests: none fails, and the new version ends with every request.
	stop := (&throughGateway{t: t, host: host}).stream()
	dt.deploy(canary("nginx:1.28"))
	weighted(25)
	update(api.UpdatePromote, api.PromoteRequest{Full: true})
	st = dt.waitRevision(dt.lease, 3)
	stream := stop()
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	t.Logf("from 0 to 100: %v", stream)
	assert.Zero(t, stream["failed"], "no request failed from 0 to 100: %v", stream)
	assert.Positive(t, stream["nginx:1.28"], "the stream met the new version: %v", stream)
	weighted(0)
	assert.Equal(t, map[string]int{"nginx:1.28": 100}, shares(100), "rolled out: every request to the new version, through its stable Service")
}

// throughGateway asks the stack's Gateway for host.
type throughGateway struct {
	t    *testing.T
	host string
}

// shares sends n requests for the host through the Gateway, one after
// another, and counts the answers by image ("failed": an error or a
// status other than 200; the first one is logged, where g has a test).
func (g *throughGateway) shares(n int) map[string]int {
	httpc := &http.Client{Timeout: 5 * time.Second}
	out := map[string]int{}
	for range n {
		req, _ := http.NewRequest(http.MethodGet, "http://"+devstack.GatewayAddress+"/", nil)
		req.Host = g.host
		resp, err := httpc.Do(req)
		if err != nil {
			out["failed"]++
			if out["failed"] == 1 && g.t != nil {
				g.t.Logf("a request for %s failed: %v", g.host, err)
			}
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			out["failed"]++
			if out["failed"] == 1 && g.t != nil {
				g.t.Logf("a request for %s failed: %s %s", g.host, resp.Status, body)
			}
			continue
		}
		out[resp.Header.Get(devstack.HeaderImage)]++
	}
	return out
}

// servedBy waits until the Gateway serves the host's new route: 20
// requests in a row answered by pods of image. A route new to the Gateway
// (a lease's first deploy) is accepted before the proxy has its Service's
// endpoints, and answers 503 "no available server" until then, a few
// hundred milliseconds (CI once asked in that moment).
func (g *throughGateway) servedBy(image string) {
	g.t.Helper()
	testenv.Eventually(g.t, 2*time.Minute, 100*time.Millisecond, "the Gateway never served "+g.host+" from "+image, func() (bool, string) {
		got := g.quiet().shares(20)
		return got[image] == 20, fmt.Sprint(got)
	})
}

// quiet is g, without logging its failures.
func (g *throughGateway) quiet() *throughGateway { return &throughGateway{host: g.host} }

// stream sends a request every 5ms until stopped, and the stop returns
// the answers' counts (as shares).
func (g *throughGateway) stream() (stop func() map[string]int) {
	counts := map[string]int{}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
			for k, v := range g.shares(1) {
				counts[k] += v
			}
		}
	}()
	return func() map[string]int {
		close(quit)
		<-done
		return counts
	}
}

// routeBackends are an HTTPRoute's first rule's backends and weights,
// "web-stable=75,web-canary=25".
func routeBackends(r *unstructured.Unstructured) string {
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	if len(rules) == 0 {
		return "no rule"
	}
	refs, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "backendRefs")
	var got []string
	for _, ref := range refs {
		name, _, _ := unstructured.NestedString(ref.(map[string]any), "name")
		w, _, _ := unstructured.NestedInt64(ref.(map[string]any), "weight")
		got = append(got, fmt.Sprintf("%s=%d", name, w))
	}
	return strings.Join(got, ",")
}

// Issue 38.4, blue-green: with --routing gateway a blue-green service's
// route weighs its active Service (100) and its preview Service (0); the
// preview gets none of the hostname's requests, and the switch at
// promotion is a change of the route's backends (every request to the
// preview Service, pinned to the new version, then back to the active
// one once it selects the new version too), each accepted by the Gateway
// before the next, which loses no request of a steady stream.
func TestABlueGreenSwitchThroughTheGatewayLosesNoRequest(t *testing.T) {
	dt, _ := throughTheStacksGateway(t)
	host := "web." + dt.lease + ".example.com"
	ctx := context.Background()
	g := &throughGateway{t: t, host: host}
	routes := dt.env.Dynamic.Resource(activities.HTTPRouteResource).Namespace(manifest.Namespace(dt.lease))
	blueGreen := func(image string) manifest.Manifest {
		m := web(dt.lease, "web", image, 2, host)
		delay := int32(2)
		m.Services[0].Rollout = &manifest.Rollout{Strategy: manifest.StrategyBlueGreen,
			BlueGreen: &manifest.BlueGreen{ScaleDownDelaySeconds: &delay}} // promoted by hand
		return m
	}
	dt.deploy(blueGreen("nginx:1.26"))
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	g.servedBy("nginx:1.26")
	assert.Equal(t, map[string]int{"nginx:1.26": 50}, g.shares(50))
	route, err := routes.Get(ctx, manifest.RouteName("web", 80), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "web=100,web-preview=0", routeBackends(route))
	// Every change of the route's backends from now on, in order.
	watch, err := routes.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + route.GetName(), ResourceVersion: route.GetResourceVersion()})
	require.NoError(t, err)
	// (Seeded with the route as read: a status-only update is no change.)
	switched := []string{routeBackends(route)}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range watch.ResultChan() {
			if r, ok := ev.Object.(*unstructured.Unstructured); ok {
				if b := routeBackends(r); len(switched) == 0 || switched[len(switched)-1] != b {
					switched = append(switched, b)
				}
			}
		}
	}()

	stop := g.stream()
	dt.deploy(blueGreen("nginx:1.27"))
	id := api.RolloutWorkflowID(manifest.Namespace(dt.lease), "web")
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the preview never came up", func() (bool, string) {
		v, err := dt.env.Patient().QueryWorkflow(ctx, id, "", api.QueryStatus)
		if err != nil {
			return false, err.Error()
		}
		var rs api.RolloutStatus
		if err := v.Get(&rs); err != nil {
			return false, err.Error()
		}
		return strings.Contains(rs.Message, "promot"), rs.Message
	})
	assert.Equal(t, map[string]int{"nginx:1.26": 50}, g.shares(50), "the preview takes no request for the hostname")
	require.NoError(t, dt.env.Update(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: api.UpdatePromote,
		Args: []any{api.PromoteRequest{}}, WaitForStage: client.WorkflowUpdateStageCompleted}, nil))
	st = dt.waitRevision(dt.lease, 2)
	got := stop()
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	watch.Stop()
	<-watched
	t.Logf("through the switch: %v; the route's backends: %v", got, switched)
	assert.Zero(t, got["failed"], "no request failed through the switch: %v", got)
	assert.Equal(t, []string{"web=100,web-preview=0", "web=0,web-preview=100", "web=100,web-preview=0"}, switched,
		"the switch moved the route to the preview, then back to the active Service")
	assert.Equal(t, map[string]int{"nginx:1.27": 50}, g.shares(50), "switched: every request to the new version")
}

// throughTheStacksGateway is a deploy test whose worker routes hostnames
// through the stack's Gateway (--routing gateway), and that Gateway; it
// needs the data plane.
func throughTheStacksGateway(t *testing.T) (*deployTest, manifest.GatewayRef) {
	t.Helper()
	testenv.DataPlane(t)
	gw := manifest.GatewayRef{Namespace: devstack.GatewayNamespace, Name: devstack.GatewayName, Section: devstack.GatewayListener}
	dt := newDeployTestWith(t, func(a *activities.Activities) {
		a.Gateway = &activities.GatewayRouting{Ref: gw, Dynamic: testenv.Get(t).Dynamic}
	})
	return dt, gw
}
