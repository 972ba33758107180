package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/deployflow/deployflow/internal/manifest"
)

// Where the cluster touches a lease's HTTPRoutes (issue 38.3): with
// --routing gateway, ApplyObjects applies them instead of the lease's
// Ingress, prunes the lease's routes no longer rendered, and reports a
// route applied only once the Gateway accepted it and resolved its
// backends for the generation applied (its status), as a Gateway API
// implementation reports it has programmed the route.

// GatewayRouting is the operator's Gateway (--routing gateway): where the
// lease's HTTPRoutes are parented, and the client that writes them.
type GatewayRouting struct {
	Ref     manifest.GatewayRef
	Dynamic dynamic.Interface
	// AcceptTimeout bounds the wait for the Gateway to accept a route (0:
	// defaultAcceptTimeout).
	AcceptTimeout time.Duration
}

// HTTPRouteResource is gateway.networking.k8s.io/v1 HTTPRoutes.
var HTTPRouteResource = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}

const defaultAcceptTimeout = 30 * time.Second

// ErrRouteNotAccepted is the failure of a route the Gateway did not accept
// in time (retried: the Gateway may be catching up).
const ErrRouteNotAccepted = "RouteNotAccepted"

// applyRoutes applies in's HTTPRoutes, marks them kept, and records those
// whose content changed.
func (a *Activities) applyRoutes(ctx context.Context, in ApplyObjectsInput, owners []metav1.OwnerReference, keep map[string]bool, res *ApplyObjectsResult) error {
	if len(in.HTTPRoutes) == 0 {
		return nil
	}
	if a.Gateway == nil {
		return fmt.Errorf("the lease's hostnames render to HTTPRoutes, and this worker routes through no Gateway (--routing gateway)")
	}
	routes := a.Gateway.Dynamic.Resource(HTTPRouteResource).Namespace(in.Namespace)
	for _, r := range in.HTTPRoutes {
		r = r.DeepCopy()
		r.TypeMeta = metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "HTTPRoute"}
		r.Namespace = in.Namespace
		name := "HTTPRoute/" + r.Name
		keep[name] = true
		changed, err := a.apply(ctx, in, name, r, &r.ObjectMeta, owners,
			func() (metav1.Object, error) { return routes.Get(ctx, r.Name, metav1.GetOptions{}) },
			func(body []byte, opts metav1.PatchOptions) error {
				_, err := routes.Patch(ctx, r.Name, types.ApplyPatchType, body, opts)
				return err
			})
		if err != nil {
			return err
		}
		if changed {
			res.Changed = append(res.Changed, name)
		}
	}
	if in.DryRun {
		return nil
	}
	return a.waitRoutesAccepted(ctx, in)
}

// waitRoutesAccepted waits until the Gateway's status of each of in's
// routes says Accepted and ResolvedRefs for the route's generation.
func (a *Activities) waitRoutesAccepted(ctx context.Context, in ApplyObjectsInput) error {
	names := make([]string, 0, len(in.HTTPRoutes))
	for _, r := range in.HTTPRoutes {
		names = append(names, r.Name)
	}
	return a.waitAccepted(ctx, in.Namespace, names)
}

// waitAccepted waits until the Gateway accepted each of the named routes
// for its current generation.
func (a *Activities) waitAccepted(ctx context.Context, ns string, names []string) error {
	timeout := a.Gateway.AcceptTimeout
	if timeout <= 0 {
		timeout = defaultAcceptTimeout
	}
	routes := a.Gateway.Dynamic.Resource(HTTPRouteResource).Namespace(ns)
	for _, name := range names {
		last := "no status yet"
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			got, err := routes.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			ok, why := RouteAccepted(got, a.Gateway.Ref)
			last = why
			return ok, nil
		})
		if err != nil {
			return temporal.NewApplicationError(fmt.Sprintf("HTTPRoute %s/%s: the Gateway %s/%s has not accepted it within %s: %s",
				ns, name, a.Gateway.Ref.Namespace, a.Gateway.Ref.Name, timeout, last), ErrRouteNotAccepted)
		}
	}
	return nil
}

// RouteAccepted reports whether route's status, for the parent gw, says
// Accepted and ResolvedRefs for the route's current generation, and if
// not, what it says.
func RouteAccepted(route *unstructured.Unstructured, gw manifest.GatewayRef) (bool, string) {
	var status gatewayv1.HTTPRouteStatus
	raw, _, _ := unstructured.NestedMap(route.Object, "status")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &status); err != nil {
		return false, "status: " + err.Error()
	}
	for _, p := range status.Parents {
		if string(p.ParentRef.Name) != gw.Name || (p.ParentRef.Namespace != nil && string(*p.ParentRef.Namespace) != gw.Namespace) {
			continue
		}
		var says []string
		ok := true
		for _, t := range []gatewayv1.RouteConditionType{gatewayv1.RouteConditionAccepted, gatewayv1.RouteConditionResolvedRefs} {
			c := meta.FindStatusCondition(p.Conditions, string(t))
			switch {
			case c == nil:
				ok = false
				says = append(says, string(t)+" not reported")
			case c.ObservedGeneration != route.GetGeneration():
				ok = false
				says = append(says, fmt.Sprintf("%s for generation %d, not %d", t, c.ObservedGeneration, route.GetGeneration()))
			case c.Status != metav1.ConditionTrue:
				ok = false
				says = append(says, fmt.Sprintf("%s %s: %s %s", t, c.Status, c.Reason, c.Message))
			}
		}
		return ok, strings.Join(says, "; ")
	}
	return false, fmt.Sprintf("no status from Gateway %s/%s yet", gw.Namespace, gw.Name)
}

// pruneRoutes deletes the lease's HTTPRoutes not kept (by label), and
// counts them pruned. A cluster without the Gateway API has none.
func (a *Activities) pruneRoutes(ctx context.Context, in ApplyObjectsInput, keep, pruned map[string]bool) error {
	if a.Gateway == nil {
		return nil
	}
	routes := a.Gateway.Dynamic.Resource(HTTPRouteResource).Namespace(in.Namespace)
	list, err := routes.List(ctx, metav1.ListOptions{LabelSelector: LeaseLabel + "=" + in.Lease})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("list HTTPRoutes of lease %s: %w", in.Lease, err)
	}
	for _, r := range list.Items {
		name := "HTTPRoute/" + r.GetName()
		if keep[name] {
			continue
		}
		if !in.DryRun {
			if err := routes.Delete(ctx, r.GetName(), uidPrecondition(r.GetUID())); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete HTTPRoute %s/%s: %w", in.Namespace, r.GetName(), err)
			}
		}
		pruned[name] = true
	}
	return nil
}
