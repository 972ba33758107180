package manifest

import (
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Hostnames as Gateway API HTTPRoutes (issue 38.3): where the operator
// routes through a Gateway (--routing gateway), a lease's HTTP hostnames
// become one HTTPRoute per service and exposed port, parented to the
// operator's Gateway, instead of the lease's Ingress.

// GatewayRef is the operator's Gateway (and listener) that a lease's
// HTTPRoutes are parented to.
type GatewayRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Section is the listener's name ("": every listener of the Gateway).
	Section string `json:"section,omitempty"`
}

// RouteName is the name of the HTTPRoute of service svc's port: the
// service, a dash, the port. It names one route per service and port (a
// service name never ends in a dash and digits that are a port of another
// service's: the port is what follows the last dash).
func RouteName(svc string, port int32) string { return svc + "-" + strconv.Itoa(int(port)) }

// HTTPRoutes are the lease's HTTPRoutes on gw: for each service's port
// exposed over HTTP, one route named RouteName with the port's hostnames
// (sorted), sending every path to the service's ClusterIP Service on that
// port (a traffic-routed canary's: to its stable Service, weight 100, and
// its canary Service, weight 0, see TrafficServices; a blue-green's: to its
// active Service, weight 100, and its preview Service, weight 0).
// Hostnames in skip are left out, and a route left with none is not
// rendered. The routes are sorted by name.
func (m *Manifest) HTTPRoutes(gw GatewayRef, skip map[string]bool) []*gatewayv1.HTTPRoute {
	d := m.defaulted()
	if d == nil {
		return nil
	}
	var out []*gatewayv1.HTTPRoute
	for _, s := range d.Services {
		for _, p := range s.Ports {
			if p.Expose == nil || p.Expose.HTTP == nil {
				continue
			}
			var hosts []gatewayv1.Hostname
			for _, h := range slices.Sorted(slices.Values(p.Expose.HTTP.Hostnames)) {
				if !skip[h] {
					hosts = append(hosts, gatewayv1.Hostname(h))
				}
			}
			if len(hosts) == 0 {
				continue
			}
			parent := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(gw.Name)}
			if gw.Namespace != "" {
				ns := gatewayv1.Namespace(gw.Namespace)
				parent.Namespace = &ns
			}
			if gw.Section != "" {
				section := gatewayv1.SectionName(gw.Section)
				parent.SectionName = &section
			}
			port := p.Port
			backends := []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: gatewayv1.ObjectName(s.Name), Port: &port,
			}}}}
			if s.RouteWeighted() {
				// A canary: every request to the stable Service until a
				// setWeight step moves some to the canary one. A
				// blue-green: every request to the active Service, none
				// to the preview but during a switch.
				first, second := RouteBackends(s.Name, s.RouteSwitched())
				backends = []gatewayv1.HTTPBackendRef{weighted(first, port, 100), weighted(second, port, 0)}
			}
			out = append(out, &gatewayv1.HTTPRoute{
				TypeMeta: metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "HTTPRoute"},
				ObjectMeta: metav1.ObjectMeta{
					Name:      RouteName(s.Name, p.Port),
					Namespace: Namespace(d.Lease),
					Labels:    objectLabels(d.Lease, s.Name),
				},
				Spec: gatewayv1.HTTPRouteSpec{
					CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
					Hostnames:       hosts,
					Rules:           []gatewayv1.HTTPRouteRule{{BackendRefs: backends}},
				},
			})
		}
	}
	slices.SortFunc(out, func(a, b *gatewayv1.HTTPRoute) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// weighted is a backend of a route: Service name's port, with weight.
func weighted(name string, port, weight int32) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: &port},
		Weight:                 &weight,
	}}
}
