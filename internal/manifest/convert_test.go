package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/deployflow/deployflow/k8s/rollout"
)

// parsedHappy is happyYAML through Parse.
func parsedHappy(t *testing.T) *Manifest {
	t.Helper()
	m, err := Parse([]byte(happyYAML))
	require.NoError(t, err)
	return m
}

func TestServiceLabelIsTheRolloutEngines(t *testing.T) {
	// activities.ServiceLabel; the rollout engine finds ReplicaSets by it.
	assert.Equal(t, "deployflow.dev/service", ServiceLabel)
	assert.Equal(t, "deployflow.dev/lease", LeaseLabel)
	assert.Equal(t, "app.kubernetes.io/managed-by", ManagedByLabel)
	assert.Equal(t, "deployflow", ManagedBy)
}

func TestDeploymentOfARollingUpdateService(t *testing.T) {
	d, err := parsedHappy(t).Deployment("web")
	require.NoError(t, err)

	assert.Equal(t, metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, d.TypeMeta)
	assert.Equal(t, "web", d.Name)
	assert.Equal(t, "lease-shop-42", d.Namespace)
	assert.Equal(t, map[string]string{LeaseLabel: "shop-42", ServiceLabel: "web", ManagedByLabel: "deployflow"}, d.Labels)
	assert.Empty(t, d.Annotations)

	spec := d.Spec
	assert.Equal(t, int32(3), *spec.Replicas)
	assert.Equal(t, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, spec.Selector)
	assert.Equal(t, map[string]string{"app": "web", LeaseLabel: "shop-42", ServiceLabel: "web", "tier": "frontend"}, spec.Template.Labels)
	assert.Equal(t, map[string]string{"deployflow.dev/ready-after": "1s"}, spec.Template.Annotations)
	sel, err := metav1.LabelSelectorAsSelector(spec.Selector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set(spec.Template.Labels)), "the selector must match the pod template")

	assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, spec.Strategy.Type)
	require.NotNil(t, spec.Strategy.RollingUpdate)
	assert.Equal(t, intstr.FromInt32(2), *spec.Strategy.RollingUpdate.MaxSurge)
	assert.Equal(t, intstr.FromString("10%"), *spec.Strategy.RollingUpdate.MaxUnavailable)
	assert.Equal(t, int32(5), spec.MinReadySeconds)
	assert.Equal(t, int32(600), *spec.ProgressDeadlineSeconds)
	assert.Equal(t, int32(10), *spec.RevisionHistoryLimit)

	require.Len(t, spec.Template.Spec.Containers, 1)
	c := spec.Template.Spec.Containers[0]
	assert.Equal(t, "web", c.Name)
	assert.Equal(t, "registry.example.com:5000/shop/web:v1.2.3", c.Image)
	assert.Equal(t, []string{"/bin/web"}, c.Command)
	assert.Equal(t, []string{"--listen", ":8080"}, c.Args)
	assert.Equal(t, []corev1.EnvVar{
		{Name: "API_URL", Value: "http://api:9090"},
		{Name: "DEBUG", Value: "true"},
		{Name: "LOG_LEVEL", Value: "debug"},
	}, c.Env, "env sorted by name")
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	assert.Equal(t, want, c.Resources.Requests)
	assert.Equal(t, want, c.Resources.Limits)
	assert.Equal(t, []corev1.ContainerPort{{ContainerPort: 8080, Protocol: "TCP"}, {ContainerPort: 8443, Protocol: "TCP"}}, c.Ports)

	// Everything the API server would default is already set.
	defaulted := d.DeepCopy()
	rollout.SetDeploymentDefaults(defaulted)
	assert.Equal(t, d, defaulted)
}

func TestDeploymentOfARecreateService(t *testing.T) {
	d, err := parsedHappy(t).Deployment("dns")
	require.NoError(t, err)
	spec := d.Spec
	assert.Equal(t, int32(1), *spec.Replicas)
	assert.Equal(t, appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, spec.Strategy)
	assert.Equal(t, int32(0), spec.MinReadySeconds)
	assert.Equal(t, int32(120), *spec.ProgressDeadlineSeconds)
	assert.Equal(t, int32(3), *spec.RevisionHistoryLimit)
	assert.Equal(t, map[string]string{"app": "dns", LeaseLabel: "shop-42", ServiceLabel: "dns"}, spec.Template.Labels)
	assert.Nil(t, spec.Template.Annotations)
	c := spec.Template.Spec.Containers[0]
	assert.Equal(t, "coredns/coredns@"+digest, c.Image)
	assert.Nil(t, c.Env)
	assert.Nil(t, c.Command)
	assert.Equal(t, corev1.ResourceRequirements{}, c.Resources)
	assert.Equal(t, []corev1.ContainerPort{{ContainerPort: 53, Protocol: "UDP"}, {ContainerPort: 9153, Protocol: "TCP"}}, c.Ports)

	// AutoRollback is the rollout engine's, not the Deployment's.
	s, ok := parsedHappy(t).Lookup("dns")
	require.True(t, ok)
	assert.False(t, *s.Rollout.AutoRollback)
	s, _ = parsedHappy(t).Lookup("web")
	assert.True(t, *s.Rollout.AutoRollback)
}

func TestDeploymentIsDeterministicAndDefaultsItself(t *testing.T) {
	m := parsedHappy(t)
	a, err := m.Deployment("web")
	require.NoError(t, err)
	b, err := m.WithDefaults().Deployment("web")
	require.NoError(t, err)
	assert.Equal(t, a, b)
	assert.Equal(t, happyManifest(), m, "conversion must not modify the manifest")
	// The result does not share memory with the manifest.
	a.Spec.Template.Labels["tier"] = "x"
	a.Spec.Template.Annotations["x"] = "y"
	*a.Spec.Replicas = 9
	assert.Equal(t, happyManifest(), m)
}

func TestDeploymentErrors(t *testing.T) {
	_, err := parsedHappy(t).Deployment("nope")
	assert.EqualError(t, err, `manifest: no service "nope" (services: [web dns])`)

	m := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx", Resources: &Resources{CPU: "lots"}}}}
	_, err = m.Deployment("web")
	assert.ErrorContains(t, err, `service web: cpu "lots"`)

	var nilManifest *Manifest
	_, err = nilManifest.Deployment("web")
	assert.Error(t, err)
}

func TestDeploymentSharesAContainerPort(t *testing.T) {
	m := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx", Ports: []Port{
		{Port: 80, TargetPort: 8080}, {Port: 8080}, {Port: 81, TargetPort: 8080, Protocol: "UDP"},
	}}}}
	require.NoError(t, m.Validate())
	d, err := m.Deployment("web")
	require.NoError(t, err)
	assert.Equal(t, []corev1.ContainerPort{{ContainerPort: 8080, Protocol: "TCP"}, {ContainerPort: 8080, Protocol: "UDP"}}, d.Spec.Template.Spec.Containers[0].Ports)
}

func TestClusterIPServices(t *testing.T) {
	m := parsedHappy(t)
	m.Services = append(m.Services, Service{Name: "worker", Image: "worker"}) // no ports, no Service
	svcs := m.ClusterIPServices()
	require.Len(t, svcs, 2)

	web, dns := svcs[0], svcs[1]
	assert.Equal(t, metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, web.TypeMeta)
	assert.Equal(t, "web", web.Name)
	assert.Equal(t, "lease-shop-42", web.Namespace)
	assert.Equal(t, map[string]string{LeaseLabel: "shop-42", ServiceLabel: "web", ManagedByLabel: "deployflow"}, web.Labels)
	assert.Equal(t, corev1.ServiceTypeClusterIP, web.Spec.Type)
	assert.Equal(t, map[string]string{"app": "web"}, web.Spec.Selector)
	assert.Equal(t, []corev1.ServicePort{
		{Name: "p80", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: "TCP"},
		{Name: "p443", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: "TCP"},
	}, web.Spec.Ports)
	assert.Empty(t, web.Spec.LoadBalancerIP)

	assert.Equal(t, "dns", dns.Name)
	assert.Equal(t, map[string]string{"app": "dns"}, dns.Spec.Selector)
	assert.Equal(t, []corev1.ServicePort{
		{Name: "p53", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: "UDP"},
		{Name: "p9153", Port: 9153, TargetPort: intstr.FromInt32(9153), Protocol: "TCP"},
	}, dns.Spec.Ports)
}

func TestIngress(t *testing.T) {
	ing := parsedHappy(t).Ingress()
	require.NotNil(t, ing)
	assert.Equal(t, metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}, ing.TypeMeta)
	assert.Equal(t, "lease-ingress", ing.Name)
	assert.Equal(t, "lease-shop-42", ing.Namespace)
	assert.Equal(t, map[string]string{LeaseLabel: "shop-42", ManagedByLabel: "deployflow"}, ing.Labels)
	assert.Nil(t, ing.Spec.IngressClassName)
	prefix := networkingv1.PathTypePrefix
	rule := func(host string) networkingv1.IngressRule {
		return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}},
			}}},
		}}}
	}
	// Sorted by host, not in manifest order.
	assert.Equal(t, []networkingv1.IngressRule{rule("shop.example.com"), rule("www.shop.example.com")}, ing.Spec.Rules)
}

func TestIngressIsNilWithoutHostnames(t *testing.T) {
	m := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx", Ports: []Port{{Port: 80, Expose: &Expose{IP: "edge"}}}}}}
	assert.Nil(t, m.Ingress())
	var nilManifest *Manifest
	assert.Nil(t, nilManifest.Ingress())
}

func TestLoadBalancerServices(t *testing.T) {
	ips := map[string]string{"edge": "203.0.113.7", "unused": "not even an IP"}
	svcs, err := parsedHappy(t).LoadBalancerServices(ips)
	require.NoError(t, err)
	require.Len(t, svcs, 2)

	web, dns := svcs[0], svcs[1]
	assert.Equal(t, "web-ip-edge", web.Name)
	assert.Equal(t, "lease-shop-42", web.Namespace)
	assert.Equal(t, map[string]string{LeaseLabel: "shop-42", ServiceLabel: "web", ManagedByLabel: "deployflow", IPEndpointLabel: "edge"}, web.Labels)
	assert.Equal(t, map[string]string{"deployflow.dev/declared-ip": "203.0.113.7"}, web.Annotations)
	assert.Equal(t, corev1.ServiceTypeLoadBalancer, web.Spec.Type)
	assert.Equal(t, "203.0.113.7", web.Spec.LoadBalancerIP)
	assert.Equal(t, map[string]string{"app": "web"}, web.Spec.Selector)
	assert.Equal(t, []corev1.ServicePort{{Name: "p443", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: "TCP"}}, web.Spec.Ports,
		"only the ports exposed on the endpoint")

	assert.Equal(t, "dns-ip-edge", dns.Name)
	assert.Equal(t, "203.0.113.7", dns.Spec.LoadBalancerIP)
	assert.Equal(t, []corev1.ServicePort{{Name: "p53", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: "UDP"}}, dns.Spec.Ports)
}

func TestLoadBalancerServicesPerEndpoint(t *testing.T) {
	m := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx", Ports: []Port{
		{Port: 443, Expose: &Expose{IP: "west"}},
		{Port: 80, Expose: &Expose{IP: "east"}},
		{Port: 8443, Expose: &Expose{IP: "west"}},
		{Port: 9000},
	}}}}
	require.NoError(t, m.Validate())
	svcs, err := m.LoadBalancerServices(map[string]string{"east": "2001:db8::1", "west": "198.51.100.2"})
	require.NoError(t, err)
	require.Len(t, svcs, 2)
	assert.Equal(t, "web-ip-east", svcs[0].Name)
	assert.Equal(t, "2001:db8::1", svcs[0].Spec.LoadBalancerIP)
	assert.Equal(t, []string{"p80"}, portNames(svcs[0]))
	assert.Equal(t, "web-ip-west", svcs[1].Name)
	assert.Equal(t, []string{"p443", "p8443"}, portNames(svcs[1]))
}

func portNames(s *corev1.Service) []string {
	var out []string
	for _, p := range s.Spec.Ports {
		out = append(out, p.Name)
	}
	return out
}

func TestLoadBalancerServicesNeedAnIPPerEndpoint(t *testing.T) {
	m := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx", Ports: []Port{
		{Port: 1, Expose: &Expose{IP: "a"}}, {Port: 2, Expose: &Expose{IP: "b"}}, {Port: 3, Expose: &Expose{IP: "c"}},
	}}}}
	_, err := m.LoadBalancerServices(map[string]string{"b": "", "c": "10.0.0.300"})
	assert.EqualError(t, err, "manifest: IP endpoint \"a\" has no IP\n"+
		"manifest: IP endpoint \"b\" has no IP\n"+
		"manifest: IP endpoint \"c\": \"10.0.0.300\" is not an IP address")

	none := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx"}}}
	svcs, err := none.LoadBalancerServices(nil)
	require.NoError(t, err)
	assert.Empty(t, svcs)
}

// A blue-green service has two ClusterIP Services, the active one (its
// name) and the preview, labelled with their role, selecting the service's
// pods (the rollout pins each to one version); its LoadBalancer Services
// are active ones.
func TestBlueGreenServicesAreActiveAndPreview(t *testing.T) {
	m, err := Parse([]byte("lease: shop-42\nservices:\n  - name: web\n    image: nginx:1.27\n    ports: [{port: 80, expose: {ip: public}}]\n    rollout: {strategy: BlueGreen}\n"))
	require.NoError(t, err)
	svcs := m.ClusterIPServices()
	require.Len(t, svcs, 2)
	assert.Equal(t, "web", svcs[0].Name)
	assert.Equal(t, RoleActive, svcs[0].Labels[RoleLabel])
	assert.Equal(t, "web-preview", svcs[1].Name)
	assert.Equal(t, RolePreview, svcs[1].Labels[RoleLabel])
	assert.Equal(t, svcs[0].Spec.Selector, svcs[1].Spec.Selector)
	assert.Equal(t, svcs[0].Spec.Ports, svcs[1].Spec.Ports)
	lbs, err := m.LoadBalancerServices(map[string]string{"public": "192.0.2.7"})
	require.NoError(t, err)
	require.Len(t, lbs, 1)
	assert.Equal(t, RoleActive, lbs[0].Labels[RoleLabel])

	d, err := m.Deployment("web")
	require.NoError(t, err)
	assert.Equal(t, "RollingUpdate", string(d.Spec.Strategy.Type), "the old version's scale-down after the switch is a RollingUpdate's")
}

// Issue 37.2: a service's ephemeral storage (the node disk its logs,
// writable layer and emptyDir take) is its container's request and limit,
// beside CPU and memory, and survives the defaults being filled. Before,
// a manifest could not say it: the namespace's default limit applied.
func TestEphemeralStorageIsTheContainersRequestAndLimit(t *testing.T) {
	m := &Manifest{Lease: "shop", Services: []Service{{Name: "web", Image: "nginx:1.27",
		Resources: &Resources{EphemeralStorage: "2Gi"}}}}
	require.NoError(t, m.Validate())
	d, err := m.WithDefaults().Deployment("web")
	require.NoError(t, err)
	r := d.Spec.Template.Spec.Containers[0].Resources
	assert.Equal(t, resource.MustParse("2Gi"), r.Requests[corev1.ResourceEphemeralStorage])
	assert.Equal(t, resource.MustParse("2Gi"), r.Limits[corev1.ResourceEphemeralStorage])

	m.Services[0].Resources.EphemeralStorage = "lots"
	err = m.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `services[0].resources.ephemeralStorage: "lots" is not a Kubernetes quantity: write e.g. 1Gi or 500Mi`)
}
