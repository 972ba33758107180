package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/kube"
)

// Where a route's weights touch the cluster (issue 38.4): a canary's
// stable and canary Services' selectors (a blue-green's active and
// preview Services'), and its HTTPRoutes' backend weights. The rollout
// decides the weight (workflows/rollout/traffic.go).

// TrafficInput sets a traffic-routed canary's split: its stable Service
// pinned to StableHash, its canary Service to CanaryHash (pod-template-
// hashes), and CanaryWeight percent of each route's requests to the canary
// Service, the rest to the stable one. With BlueGreen, the two Services
// are a blue-green's active Service (StableHash) and preview Service
// (CanaryHash).
type TrafficInput struct {
	Namespace    string   `json:"namespace"`
	Service      string   `json:"service"`
	Routes       []string `json:"routes"`
	StableHash   string   `json:"stableHash"`
	CanaryHash   string   `json:"canaryHash"`
	CanaryWeight int32    `json:"canaryWeight"`
	BlueGreen    bool     `json:"blueGreen,omitempty"`
	// ScaledToZero: the service runs no pod (replicas 0), so no Service
	// has endpoints to wait for; the weights are written as asked.
	ScaledToZero bool `json:"scaledToZero,omitempty"`
}

// TrafficResult is what SetTraffic changed ("Service/web-canary → 5d4f…",
// "HTTPRoute/web-80 → 25% canary").
type TrafficResult struct {
	Changed []string `json:"changed,omitempty"`
}

// ErrRouteNotOurs is the failure of a route whose backends are not the
// canary's stable and canary Services, or the blue-green's active and
// preview Services (someone else changed them): not retried, and nothing
// is written to it.
const ErrRouteNotOurs = "RouteNotOurs"

// SetTraffic pins the Services, then sets each route's two backend
// weights, and returns once the Gateway accepted every route for the
// generation that carries the weights (RouteAccepted): the weight is
// applied. Nothing else of a route is written (a JSON patch that first
// tests the backends are the two Services). Safe to retry: a route already
// at the weight is not written again.
func (a *Activities) SetTraffic(ctx context.Context, in TrafficInput) (*TrafficResult, error) {
	if a.Gateway == nil {
		return nil, temporal.NewNonRetryableApplicationError("the canary's weight is set on its HTTPRoutes, and this worker routes through no Gateway (--routing gateway)", ErrRouteNotOurs, nil)
	}
	if in.CanaryWeight < 0 || in.CanaryWeight > 100 {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("canary weight %d: want 0 to 100", in.CanaryWeight), ErrRouteNotOurs, nil)
	}
	pin := PinInput{Namespace: in.Namespace, Service: in.Service, Stable: in.StableHash, Canary: in.CanaryHash}
	if in.BlueGreen {
		pin = PinInput{Namespace: in.Namespace, Service: in.Service, Active: in.StableHash, Preview: in.CanaryHash}
	}
	pins, err := a.PinServices(ctx, pin)
	if err != nil {
		return nil, err
	}
	out := &TrafficResult{Changed: pins.Changed}
	stable, canary := manifest.RouteBackends(in.Service, in.BlueGreen)
	// Before a Service gets requests, its endpoints are its version's
	// Ready pods: the Gateway reads them with the route.
	for _, side := range []struct {
		svc, hash string
		weight    int32
	}{{stable, in.StableHash, 100 - in.CanaryWeight}, {canary, in.CanaryHash, in.CanaryWeight}} {
		if side.weight > 0 && !in.ScaledToZero {
			if err := a.waitEndpoints(ctx, in.Namespace, in.Service, side.svc, side.hash); err != nil {
				return nil, err
			}
		}
	}
	routes := a.Gateway.Dynamic.Resource(HTTPRouteResource).Namespace(in.Namespace)
	for _, name := range in.Routes {
		r, err := routes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get HTTPRoute %s/%s: %w", in.Namespace, name, err)
		}
		weights, err := backendWeights(r, stable, canary)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("HTTPRoute %s/%s: %v", in.Namespace, name, err), ErrRouteNotOurs, nil)
		}
		if weights[0] != 100-in.CanaryWeight || weights[1] != in.CanaryWeight {
			patch, _ := json.Marshal([]map[string]any{
				{"op": "test", "path": "/spec/rules/0/backendRefs/0/name", "value": stable},
				{"op": "test", "path": "/spec/rules/0/backendRefs/1/name", "value": canary},
				{"op": "replace", "path": "/spec/rules/0/backendRefs/0/weight", "value": 100 - in.CanaryWeight},
				{"op": "replace", "path": "/spec/rules/0/backendRefs/1/weight", "value": in.CanaryWeight},
			})
			if _, err := routes.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager + "-rollout"}); err != nil {
				return nil, fmt.Errorf("set the weights of HTTPRoute %s/%s: %w", in.Namespace, name, err)
			}
			out.Changed = append(out.Changed, fmt.Sprintf("HTTPRoute/%s → %d%% %s", name, in.CanaryWeight, canary))
		}
	}
	return out, a.waitAccepted(ctx, in.Namespace, in.Routes)
}

// backendWeights are route's weights of its one rule's two backends, the
// stable and the canary Service (a blue-green's active and preview; an
// absent weight is the API's default, 1), or an error if the rule is not
// that.
func backendWeights(route *unstructured.Unstructured, stable, canary string) ([2]int32, error) {
	var w [2]int32
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	if len(rules) != 1 {
		return w, fmt.Errorf("%d rules: want the one deployflow renders", len(rules))
	}
	rule, _ := rules[0].(map[string]any)
	refs, _, _ := unstructured.NestedSlice(rule, "backendRefs")
	if len(refs) != 2 {
		return w, fmt.Errorf("%d backends: want %s and %s", len(refs), stable, canary)
	}
	for i, want := range []string{stable, canary} {
		ref, _ := refs[i].(map[string]any)
		if name, _, _ := unstructured.NestedString(ref, "name"); name != want {
			return w, fmt.Errorf("backend %d is %q: want %s", i, name, want)
		}
		w[i] = 1
		if v, ok, _ := unstructured.NestedInt64(ref, "weight"); ok {
			w[i] = int32(v)
		}
	}
	return w, nil
}

// ErrEndpointsNotReady is the failure of a Service whose endpoints did not
// become its version's Ready pods in time (retried).
const ErrEndpointsNotReady = "EndpointsNotReady"

// waitEndpoints waits until Service name's EndpointSlices list as ready
// exactly the Ready pods of service svc's version hash, at least one.
func (a *Activities) waitEndpoints(ctx context.Context, ns, svc, name, hash string) error {
	timeout := a.Gateway.AcceptTimeout
	if timeout <= 0 {
		timeout = defaultAcceptTimeout
	}
	last := "not read yet"
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := a.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{"app": svc, manifest.PodTemplateHashLabel: hash}.String()})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		want := sets.New[string]()
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" && kube.PodReady(&p) {
				want.Insert(p.Status.PodIP)
			}
		}
		slices, err := a.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		got := sets.New[string]()
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					got.Insert(e.Addresses...)
				}
			}
		}
		last = fmt.Sprintf("%d Ready pods of %s, endpoints %v", want.Len(), hash, sets.List(got))
		return want.Len() > 0 && want.Equal(got), nil
	})
	if err != nil {
		return temporal.NewApplicationError(fmt.Sprintf("Service %s/%s: its endpoints are not its version's Ready pods within %s: %s", ns, name, timeout, last), ErrEndpointsNotReady)
	}
	return nil
}
