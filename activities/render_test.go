package activities

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Issue 35.5: where the operator's load balancer reaches pods directly
// (--lease-loadbalancers-without-nodeports), a declared IP endpoint's
// LoadBalancer Service allocates no NodePorts; by default it does, as
// Kubernetes does.
func TestLoadBalancerServicesAllocateNodePortsOnlyWhereTheOperatorSays(t *testing.T) {
	m, err := manifest.Parse([]byte("lease: shop\nservices:\n  - name: web\n    image: nginx:1.27\n    ports:\n      - {port: 443, expose: {ip: public}}\n"))
	require.NoError(t, err)
	ips := map[string]string{"public": "192.0.2.10"}
	lb := func(a *Activities) *corev1.Service {
		out, err := a.renderObjects(m.WithDefaults(), ips, nil)
		require.NoError(t, err)
		for _, s := range out.Services {
			if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
				return s
			}
		}
		t.Fatal("no LoadBalancer Service")
		return nil
	}
	assert.Nil(t, lb(&Activities{}).Spec.AllocateLoadBalancerNodePorts, "Kubernetes' default: NodePorts allocated")
	without := lb(&Activities{Namespace: config.NamespaceProfile{LoadBalancersWithoutNodePorts: true}})
	require.NotNil(t, without.Spec.AllocateLoadBalancerNodePorts)
	assert.False(t, *without.Spec.AllocateLoadBalancerNodePorts)
}
