package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// With --routing gateway a lease's hostnames are one HTTPRoute per service
// and port, parented to the operator's Gateway and listener, its hostnames
// sorted, sending every path to the service's port; a withheld hostname is
// left out, and a route left with none is not rendered.
func TestHostnamesRenderAsOneHTTPRoutePerServiceAndPort(t *testing.T) {
	m := Manifest{Lease: "shop", Services: []Service{
		{Name: "web", Image: "nginx:1.27", Ports: []Port{
			{Port: 80, Expose: &Expose{HTTP: &HTTPExpose{Hostnames: []string{"www.shop.example", "shop.example"}}}},
			{Port: 8080, Expose: &Expose{HTTP: &HTTPExpose{Hostnames: []string{"admin.shop.example"}}}},
		}},
		{Name: "web-80", Image: "nginx:1.27", Ports: []Port{{Port: 81, Expose: &Expose{HTTP: &HTTPExpose{Hostnames: []string{"b.shop.example"}}}}}},
		{Name: "db", Image: "postgres:17", Ports: []Port{{Port: 5432}}},
	}}
	gw := GatewayRef{Namespace: "gateway-system", Name: "public", Section: "http"}
	routes := m.HTTPRoutes(gw, map[string]bool{"admin.shop.example": true})
	require.Len(t, routes, 2, "web:80 and web-80:81; web:8080's only hostname is withheld; db exposes nothing")
	r := routes[0]
	assert.Equal(t, "web-80", r.Name)
	assert.Equal(t, "web-80-81", routes[1].Name, "another service's route: names do not collide")
	assert.Equal(t, "lease-shop", r.Namespace)
	assert.Equal(t, "web", r.Labels[ServiceLabel])
	assert.Equal(t, []gatewayv1.Hostname{"shop.example", "www.shop.example"}, r.Spec.Hostnames)
	require.Len(t, r.Spec.ParentRefs, 1)
	p := r.Spec.ParentRefs[0]
	assert.Equal(t, gatewayv1.ObjectName("public"), p.Name)
	assert.Equal(t, gatewayv1.Namespace("gateway-system"), *p.Namespace)
	assert.Equal(t, gatewayv1.SectionName("http"), *p.SectionName)
	require.Len(t, r.Spec.Rules, 1)
	b := r.Spec.Rules[0].BackendRefs
	require.Len(t, b, 1)
	assert.Equal(t, gatewayv1.ObjectName("web"), b[0].Name)
	assert.Equal(t, gatewayv1.PortNumber(80), *b[0].Port)

	quiet := Manifest{Lease: "quiet", Services: []Service{{Name: "db", Image: "postgres:17"}}}
	assert.Empty(t, quiet.HTTPRoutes(gw, nil))
}
