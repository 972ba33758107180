package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/deployflow/deployflow/internal/manifest"
)

// trafficCluster is a canary's lease namespace: Ready pods of versions
// "old" (10.0.0.1) and "new" (10.0.0.2), its stable and canary Services
// (unpinned; and a blue-green's active and preview Services), EndpointSlices listing what each selects once pinned, and
// its route web-80 with backends, accepted by gw.
func trafficCluster(t *testing.T, backends ...map[string]any) (*Activities, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	const ns = "lease-shop"
	pod := func(hash, ip string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + hash, Namespace: ns, Labels: map[string]string{"app": "web", manifest.PodTemplateHashLabel: hash}},
			Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	svc := func(name, role string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{ServiceLabel: "web", manifest.RoleLabel: role}}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	}
	slice := func(svc, ip string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svc + "-x", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}}
	}
	kube := fake.NewClientset(pod("old", "10.0.0.1"), pod("new", "10.0.0.2"), svc("web-stable", manifest.RoleStable), svc("web-canary", manifest.RoleCanary),
		slice("web-stable", "10.0.0.1"), slice("web-canary", "10.0.0.2"),
		// A blue-green's two, the same way.
		svc("web", manifest.RoleActive), svc("web-preview", manifest.RolePreview), slice("web", "10.0.0.1"), slice("web-preview", "10.0.0.2"))
	var refs []any
	for _, b := range backends {
		refs = append(refs, b)
	}
	cond := func(typ string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "observedGeneration": int64(0), "reason": "R", "message": "m", "lastTransitionTime": "2026-11-28T00:00:00Z"}
	}
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "web-80", "namespace": ns},
		"spec":     map[string]any{"rules": []any{map[string]any{"backendRefs": refs}}},
		"status": map[string]any{"parents": []any{map[string]any{"parentRef": map[string]any{"name": "public", "namespace": "gw"},
			"conditions": []any{cond("Accepted"), cond("ResolvedRefs")}}}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{HTTPRouteResource: "HTTPRouteList"}, route)
	return &Activities{Kube: kube, Gateway: &GatewayRouting{Ref: manifest.GatewayRef{Namespace: "gw", Name: "public"}, Dynamic: dyn}}, dyn
}

func backend(name string, weight int64) map[string]any {
	return map[string]any{"name": name, "port": int64(80), "weight": weight}
}

// A setWeight pins the canary's Services to their versions and sets the
// route's two weights, nothing else of it; asked again it writes nothing.
func TestSetTrafficPinsTheServicesAndWeighsTheRoute(t *testing.T) {
	a, dyn := trafficCluster(t, backend("web-stable", 100), backend("web-canary", 0))
	ctx := context.Background()
	in := TrafficInput{Namespace: "lease-shop", Service: "web", Routes: []string{"web-80"}, StableHash: "old", CanaryHash: "new", CanaryWeight: 25}
	res, err := a.SetTraffic(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, []string{"Service/web-canary → new", "Service/web-stable → old", "HTTPRoute/web-80 → 25% web-canary"}, res.Changed)
	r, err := dyn.Resource(HTTPRouteResource).Namespace("lease-shop").Get(ctx, "web-80", metav1.GetOptions{})
	require.NoError(t, err)
	w, err := backendWeights(r, "web-stable", "web-canary")
	require.NoError(t, err)
	assert.Equal(t, [2]int32{75, 25}, w)
	refs, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	port, _, _ := unstructured.NestedInt64(refs[0].(map[string]any)["backendRefs"].([]any)[1].(map[string]any), "port")
	assert.Equal(t, int64(80), port, "the rest of the backend kept")
	sel, err := a.Kube.CoreV1().Services("lease-shop").Get(ctx, "web-canary", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "new", sel.Spec.Selector[manifest.PodTemplateHashLabel])

	res, err = a.SetTraffic(ctx, in)
	require.NoError(t, err)
	assert.Empty(t, res.Changed, "a retry writes nothing")
}

// A blue-green's switch through a Gateway (issue 38.4): the route's
// weights move from the active Service to the preview one, which is
// pinned to the new version first; then the active one is pinned to it
// too and takes the requests back. The canary's Services are not touched.
func TestSetTrafficSwitchesABlueGreensRouteThroughItsPreview(t *testing.T) {
	a, dyn := trafficCluster(t, backend("web", 100), backend("web-preview", 0))
	ctx := context.Background()
	weights := func() [2]int32 {
		r, err := dyn.Resource(HTTPRouteResource).Namespace("lease-shop").Get(ctx, "web-80", metav1.GetOptions{})
		require.NoError(t, err)
		w, err := backendWeights(r, "web", "web-preview")
		require.NoError(t, err)
		return w
	}
	res, err := a.SetTraffic(ctx, TrafficInput{Namespace: "lease-shop", Service: "web", Routes: []string{"web-80"},
		StableHash: "old", CanaryHash: "new", CanaryWeight: 100, BlueGreen: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"Service/web → old", "Service/web-preview → new", "HTTPRoute/web-80 → 100% web-preview"}, res.Changed)
	assert.Equal(t, [2]int32{0, 100}, weights(), "every request to the preview, the new version")

	// The EndpointSlice controller's part (no controller here): the
	// active Service, once pinned, lists the new version's pod.
	es, err := a.Kube.DiscoveryV1().EndpointSlices("lease-shop").Get(ctx, "web-x", metav1.GetOptions{})
	require.NoError(t, err)
	es.Endpoints[0].Addresses = []string{"10.0.0.2"}
	_, err = a.Kube.DiscoveryV1().EndpointSlices("lease-shop").Update(ctx, es, metav1.UpdateOptions{})
	require.NoError(t, err)
	res, err = a.SetTraffic(ctx, TrafficInput{Namespace: "lease-shop", Service: "web", Routes: []string{"web-80"},
		StableHash: "new", CanaryHash: "new", BlueGreen: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"Service/web → new", "HTTPRoute/web-80 → 0% web-preview"}, res.Changed)
	assert.Equal(t, [2]int32{100, 0}, weights(), "every request to the active Service, now the new version")
	for _, name := range []string{"web-stable", "web-canary"} {
		s, err := a.Kube.CoreV1().Services("lease-shop").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Empty(t, s.Spec.Selector[manifest.PodTemplateHashLabel], "%s untouched", name)
	}
}

// Found in review: a service scaled to 0 has no Ready pod, so waiting for
// its Services' endpoints never ended, and its rollout (a blue-green's
// switch, or the pins at a rollout's end) failed after the call's time
// limit. With no pod to wait for, the weights are written at once.
func TestSetTrafficOfAServiceScaledToZeroWaitsForNoEndpoints(t *testing.T) {
	a, dyn := trafficCluster(t, backend("web", 100), backend("web-preview", 0))
	a.Gateway.AcceptTimeout = 200 * time.Millisecond
	ctx := context.Background()
	in := TrafficInput{Namespace: "lease-shop", Service: "web", Routes: []string{"web-80"}, StableHash: "old", CanaryHash: "gone", CanaryWeight: 100, BlueGreen: true}
	_, err := a.SetTraffic(ctx, in)
	require.Error(t, err, "a version with no Ready pod, and replicas: its endpoints are waited for")
	in.ScaledToZero = true
	_, err = a.SetTraffic(ctx, in)
	require.NoError(t, err)
	r, err := dyn.Resource(HTTPRouteResource).Namespace("lease-shop").Get(ctx, "web-80", metav1.GetOptions{})
	require.NoError(t, err)
	w, err := backendWeights(r, "web", "web-preview")
	require.NoError(t, err)
	assert.Equal(t, [2]int32{0, 100}, w)
}

// Guards the routes' other owners: a route whose backends are not the
// canary's two Services (someone changed them) is refused, not retried,
// and not written.
func TestSetTrafficRefusesARouteItDidNotRender(t *testing.T) {
	for name, backends := range map[string][]map[string]any{
		"one backend":     {backend("web", 1)},
		"another service": {backend("web-stable", 100), backend("admin", 0)},
	} {
		t.Run(name, func(t *testing.T) {
			a, dyn := trafficCluster(t, backends...)
			_, err := a.SetTraffic(context.Background(), TrafficInput{Namespace: "lease-shop", Service: "web", Routes: []string{"web-80"}, StableHash: "old", CanaryHash: "new", CanaryWeight: 25})
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			assert.Equal(t, ErrRouteNotOurs, appErr.Type())
			assert.True(t, appErr.NonRetryable())
			for _, act := range dyn.Actions() {
				assert.NotEqual(t, "patch", act.GetVerb(), "nothing written to the route")
			}
		})
	}
}
