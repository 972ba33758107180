package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func canaryShop() Manifest {
	w := int32(25)
	return Manifest{Lease: "shop", Services: []Service{
		{Name: "web", Image: "nginx:1.27", Ports: []Port{{Port: 80, Expose: &Expose{HTTP: &HTTPExpose{Hostnames: []string{"shop.example"}}}}},
			Rollout: &Rollout{Strategy: StrategyCanary, Steps: []CanaryStep{{SetWeight: &w}}}},
		{Name: "api", Image: "ghcr.io/acme/api:1", Ports: []Port{{Port: 8080, Expose: &Expose{HTTP: &HTTPExpose{Hostnames: []string{"api.shop.example"}}}}}},
		{Name: "worker", Image: "ghcr.io/acme/worker:1", Rollout: &Rollout{Strategy: StrategyCanary, Steps: []CanaryStep{{SetWeight: &w}}}},
	}}
}

// A canary with a hostname, where the operator routes through a Gateway,
// gets a stable and a canary Service (its ports, its role, selecting the
// service's pods until the rollout pins them), and its route sends every
// request to the stable one, weight 100, none to the canary one. A
// service that is not a canary, or has no hostname, keeps one backend.
func TestACanarysRouteWeighsItsStableAndCanaryServices(t *testing.T) {
	m := canaryShop()
	require.NoError(t, m.Validate())
	svcs := m.TrafficServices()
	require.Len(t, svcs, 2, "web's two; api is no canary, worker has no hostname")
	for i, want := range []struct{ name, role string }{{"web-stable", RoleStable}, {"web-canary", RoleCanary}} {
		s := svcs[i]
		assert.Equal(t, want.name, s.Name)
		assert.Equal(t, "lease-shop", s.Namespace)
		assert.Equal(t, want.role, s.Labels[RoleLabel])
		assert.Equal(t, "web", s.Labels[ServiceLabel])
		assert.Equal(t, map[string]string{"app": "web"}, s.Spec.Selector, "every pod until pinned")
		require.Len(t, s.Spec.Ports, 1)
		assert.Equal(t, int32(80), s.Spec.Ports[0].Port)
	}

	routes := m.HTTPRoutes(GatewayRef{Namespace: "gw", Name: "public"}, nil)
	require.Len(t, routes, 2)
	assert.Equal(t, "api-8080", routes[0].Name)
	require.Len(t, routes[0].Spec.Rules[0].BackendRefs, 1)
	assert.Nil(t, routes[0].Spec.Rules[0].BackendRefs[0].Weight, "not a canary: one backend, no weight")
	web := routes[1]
	assert.Equal(t, "web-80", web.Name)
	b := web.Spec.Rules[0].BackendRefs
	require.Len(t, b, 2)
	assert.Equal(t, gatewayv1.ObjectName("web-stable"), b[0].Name)
	assert.Equal(t, int32(100), *b[0].Weight)
	assert.Equal(t, gatewayv1.ObjectName("web-canary"), b[1].Name)
	assert.Equal(t, int32(0), *b[1].Weight)
	assert.Equal(t, gatewayv1.PortNumber(80), *b[1].Port)
}

// A blue-green with a hostname, where the operator routes through a
// Gateway, has its route weigh its active Service (100) and its preview
// Service (0): the preview takes no request for the hostname until the
// switch moves the weights. It gets no stable or canary Service.
func TestABlueGreensRouteWeighsItsActiveAndPreviewServices(t *testing.T) {
	m := canaryShop()
	m.Services[0].Rollout = &Rollout{Strategy: StrategyBlueGreen}
	require.NoError(t, m.Validate())
	assert.True(t, m.Services[0].RouteSwitched())
	assert.False(t, m.Services[0].TrafficRouted())
	assert.Empty(t, m.TrafficServices(), "no stable or canary Service for a blue-green")
	routes := m.HTTPRoutes(GatewayRef{Namespace: "gw", Name: "public"}, nil)
	require.Len(t, routes, 2)
	b := routes[1].Spec.Rules[0].BackendRefs
	require.Len(t, b, 2)
	assert.Equal(t, gatewayv1.ObjectName("web"), b[0].Name)
	assert.Equal(t, int32(100), *b[0].Weight)
	assert.Equal(t, gatewayv1.ObjectName("web-preview"), b[1].Name)
	assert.Equal(t, int32(0), *b[1].Weight)
	assert.False(t, m.Services[1].RouteWeighted(), "a rolling update: one backend")
}

// Guards the canary's generated Services against a tenant's service of
// the same name: refused, naming the field and the fix.
func TestACanarysStableServiceMayNotTakeAServicesName(t *testing.T) {
	m := canaryShop()
	m.Services[1].Name = "web-canary"
	err := m.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `services[0].name: its canary's canary Service, "web-canary", has the same name as services[1]: rename one of the two services`)
}

// A canary's scale-down delay is bounded, and only for a canary.
func TestAScaleDownDelayIsACanarysAndBounded(t *testing.T) {
	m := canaryShop()
	long := int32(MaxScaleDownDelaySeconds + 1)
	m.Services[0].Rollout.ScaleDownDelaySeconds = &long
	m.Services[1].Rollout = &Rollout{ScaleDownDelaySeconds: &long}
	err := m.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "services[0].rollout.scaleDownDelaySeconds: 3601: want 0 to 3600 seconds")
	assert.Contains(t, err.Error(), "services[1].rollout.scaleDownDelaySeconds: is for strategy Canary")
	assert.Equal(t, int32(DefaultScaleDownDelaySeconds), canaryShop().Services[0].Rollout.TrafficScaleDownDelay())
}
