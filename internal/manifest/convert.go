package manifest

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The conversions below take a validated manifest (Parse's, or one whose
// Validate returned nil). A deploy's manifest has its defaults (HasDefaults);
// one as written gets them filled on the way, so a manifest as written and
// its WithDefaults give the same objects. They are pure and
// deterministic: equal manifests give equal objects.

// objectLabels are the labels of every object of a lease; svc may be empty
// for lease-wide objects.
func objectLabels(lease, svc string) map[string]string {
	l := map[string]string{LeaseLabel: lease, ManagedByLabel: ManagedBy}
	if svc != "" {
		l[ServiceLabel] = svc
	}
	return l
}

// selector selects a service's pods.
func selector(svc string) map[string]string { return map[string]string{AppLabel: svc} }

// Deployment is the desired apps/v1 Deployment of service svc: named svc in
// Namespace(lease), selecting app=<svc>, with one container named svc. The
// pod template carries app, LeaseLabel and ServiceLabel plus the service's
// podLabels and podAnnotations; env is sorted by name, resources are both
// requests and limits, and strategy, minReadySeconds,
// progressDeadlineSeconds and revisionHistoryLimit come from the rollout
// settings. AutoRollback is not part of a Deployment: read it with Lookup.
//
// The Deployment is for the rollout engine; it is never created in the
// cluster. It errors if there is no service svc or a resource quantity does
// not parse.
func (m *Manifest) Deployment(svc string) (*appsv1.Deployment, error) {
	s, ok := m.Lookup(svc)
	if !ok {
		return nil, fmt.Errorf("manifest: no service %q (services: %v)", svc, m.ServiceNames())
	}
	resources, err := s.resourceRequirements()
	if err != nil {
		return nil, err
	}

	templateLabels := map[string]string{}
	for k, v := range s.PodLabels {
		templateLabels[k] = v
	}
	templateLabels[AppLabel] = svc
	templateLabels[LeaseLabel] = m.Lease
	templateLabels[ServiceLabel] = svc

	podSecurity, containerSecurity := s.Security.podSecurity()
	var affinity *corev1.Affinity
	var tolerations []corev1.Toleration
	if s.Resources != nil {
		affinity, tolerations = s.Resources.GPU.placement()
	}
	container := corev1.Container{
		Name:            svc,
		Image:           s.Image,
		Command:         cloneSlice(s.Command),
		Args:            cloneSlice(s.Args),
		Resources:       resources,
		SecurityContext: containerSecurity,
		ReadinessProbe:  s.ReadinessProbe.render(),
		LivenessProbe:   s.LivenessProbe.render(),
		StartupProbe:    s.StartupProbe.render(),
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		container.Env = append(container.Env, corev1.EnvVar{Name: k, Value: s.Env[k]})
	}
	type portKey struct {
		port  int32
		proto corev1.Protocol
	}
	seen := map[portKey]bool{}
	for _, p := range s.Ports {
		k := portKey{p.TargetPort, corev1.Protocol(p.Protocol)}
		if !seen[k] { // two Service ports may share a container port
			seen[k] = true
			container.Ports = append(container.Ports, corev1.ContainerPort{ContainerPort: k.port, Protocol: k.proto})
		}
	}

	r := s.Rollout
	strategy := appsv1.DeploymentStrategy{Type: appsv1.DeploymentStrategyType(r.Strategy)}
	if r.Strategy == StrategyCanary || r.Strategy == StrategyBlueGreen {
		// The steps go to the rollout beside the Deployment; each step's
		// scaling (a blue-green's scale-down) uses the RollingUpdate limits.
		strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{
			MaxSurge:       clonePtr(r.MaxSurge),
			MaxUnavailable: clonePtr(r.MaxUnavailable),
		}
	}

	podSpec := corev1.PodSpec{Containers: []corev1.Container{container}, SecurityContext: podSecurity, Affinity: affinity, Tolerations: tolerations}
	s.podSecrets(m.Lease, &podSpec)
	if err := s.podVolumes(&podSpec); err != nil {
		return nil, err
	}

	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      svc,
			Namespace: Namespace(m.Lease),
			Labels:    objectLabels(m.Lease, svc),
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: clonePtr(s.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector(svc)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      templateLabels,
					Annotations: cloneMap(s.PodAnnotations),
				},
				Spec: podSpec,
			},
			Strategy:                strategy,
			MinReadySeconds:         r.MinReadySeconds,
			ProgressDeadlineSeconds: clonePtr(r.ProgressDeadlineSeconds),
			RevisionHistoryLimit:    keptRevisions(r.RevisionHistoryLimit),
		},
	}, nil
}

// resourceRequirements sets requests and limits to the service's resources.
func (s *Service) resourceRequirements() (corev1.ResourceRequirements, error) {
	var req corev1.ResourceRequirements
	scratch, err := s.ephemeralVolumes()
	if err != nil {
		return req, err
	}
	if s.Resources == nil && scratch.IsZero() {
		return req, nil
	}
	list := corev1.ResourceList{}
	if !scratch.IsZero() {
		list[corev1.ResourceEphemeralStorage] = scratch
	}
	if s.Resources == nil {
		req.Requests, req.Limits = list, list.DeepCopy()
		return req, nil
	}
	for _, r := range []struct {
		name  corev1.ResourceName
		value string
	}{{corev1.ResourceCPU, s.Resources.CPU}, {corev1.ResourceMemory, s.Resources.Memory}, {corev1.ResourceEphemeralStorage, s.Resources.EphemeralStorage}} {
		if r.value == "" {
			continue
		}
		q, err := resource.ParseQuantity(r.value)
		if err != nil {
			return req, fmt.Errorf("manifest: service %s: %s %q: %w", s.Name, r.name, r.value, err)
		}
		if r.name == corev1.ResourceEphemeralStorage && !scratch.IsZero() {
			q.Add(scratch) // the ephemeral volumes' beside the logs' and the writable layer's
		}
		list[r.name] = q
	}
	s.Resources.GPU.resources(list)
	if len(list) > 0 {
		req.Requests = list
		req.Limits = list.DeepCopy()
	}
	return req, nil
}

// portName names the Service port for port number p.
func portName(p int32) string { return "p" + strconv.Itoa(int(p)) }

// servicePort is p as a Service port.
func servicePort(p Port) corev1.ServicePort {
	return corev1.ServicePort{
		Name:       portName(p.Port),
		Port:       p.Port,
		TargetPort: intstr.FromInt32(p.TargetPort),
		Protocol:   corev1.Protocol(p.Protocol),
	}
}

func service(lease, name, svc string) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: Namespace(lease),
			Labels:    objectLabels(lease, svc),
		},
		Spec: corev1.ServiceSpec{Selector: selector(svc)},
	}
}

// ClusterIPServices are the lease's ClusterIP Services, in manifest order:
// one per service that has ports, named after the service, selecting
// app=<service>, with a port named "p<port>" per port.
//
// (The method cannot be called Services: that is Manifest's field.)
func (m *Manifest) ClusterIPServices() []*corev1.Service {
	d := m.defaulted()
	if d == nil {
		return nil
	}
	var out []*corev1.Service
	for _, s := range d.Services {
		if len(s.Ports) == 0 {
			continue
		}
		svc := service(d.Lease, s.Name, s.Name)
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		for _, p := range s.Ports {
			svc.Spec.Ports = append(svc.Spec.Ports, servicePort(p))
		}
		out = append(out, svc)
		if s.Rollout.Strategy == StrategyBlueGreen {
			// The active Service and the preview, each pinned to a version.
			pinned(svc, RoleActive)
			preview := svc.DeepCopy()
			preview.Name = PreviewService(s.Name)
			pinned(preview, RolePreview)
			out = append(out, preview)
		}
	}
	return out
}

// Ingress is the lease's Ingress, IngressName, with one rule per HTTP host
// name (sorted by host) sending path prefix "/" to the service's ClusterIP
// Service on the exposed port. It is nil when no port is exposed over HTTP.
// It names no IngressClass, so the cluster's default class serves it.
func (m *Manifest) Ingress() *networkingv1.Ingress {
	d := m.defaulted()
	if d == nil {
		return nil
	}
	type backend struct {
		svc  string
		port int32
	}
	routes := map[string]backend{}
	for _, s := range d.Services {
		for _, p := range s.Ports {
			if p.Expose == nil || p.Expose.HTTP == nil {
				continue
			}
			for _, h := range p.Expose.HTTP.Hostnames {
				if _, dup := routes[h]; !dup { // Validate rejects duplicates; first wins
					routes[h] = backend{s.Name, p.Port}
				}
			}
		}
	}
	if len(routes) == 0 {
		return nil
	}
	ing := &networkingv1.Ingress{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      IngressName,
			Namespace: Namespace(d.Lease),
			Labels:    objectLabels(d.Lease, ""),
		},
	}
	prefix := networkingv1.PathTypePrefix
	for _, h := range slices.Sorted(maps.Keys(routes)) {
		b := routes[h]
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{
			Host: h,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{
					Path:     "/",
					PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: b.svc,
						Port: networkingv1.ServiceBackendPort{Number: b.port},
					}},
				}},
			}},
		})
	}
	return ing
}

// lbServiceName names the LoadBalancer Service of service svc on IP
// endpoint endpoint.
func lbServiceName(svc, endpoint string) string { return svc + "-ip-" + endpoint }

// LoadBalancerServices are the lease's LoadBalancer Services: one per service
// and IP endpoint it uses, named "<service>-ip-<endpoint>", selecting
// app=<service>, with the ports exposed on that endpoint (named "p<port>"),
// spec.loadBalancerIP set to the endpoint's IP from ips (endpoint name -> IP)
// and recorded in DeclaredIPAnnotation, and IPEndpointLabel naming the
// endpoint. The order is manifest order, then endpoint name. It errors,
// naming every one, if an endpoint the manifest uses (see IPEndpoints) has
// no valid IP in ips; entries for other endpoints are ignored.
func (m *Manifest) LoadBalancerServices(ips map[string]string) ([]*corev1.Service, error) {
	d := m.defaulted()
	if d == nil {
		return nil, nil
	}
	var errs []error
	for _, e := range d.IPEndpoints() {
		ip, ok := ips[e]
		if !ok || ip == "" {
			errs = append(errs, fmt.Errorf("manifest: IP endpoint %q has no IP", e))
		} else if _, err := netip.ParseAddr(ip); err != nil {
			errs = append(errs, fmt.Errorf("manifest: IP endpoint %q: %q is not an IP address", e, ip))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var out []*corev1.Service
	for _, s := range d.Services {
		for _, e := range s.ipEndpoints() {
			svc := service(d.Lease, lbServiceName(s.Name, e), s.Name)
			svc.Labels[IPEndpointLabel] = e
			if s.Rollout.Strategy == StrategyBlueGreen {
				pinned(svc, RoleActive)
			}
			svc.Annotations = map[string]string{DeclaredIPAnnotation: ips[e]}
			svc.Spec.Type = corev1.ServiceTypeLoadBalancer
			svc.Spec.LoadBalancerIP = ips[e]
			for _, p := range s.Ports {
				if p.Expose != nil && p.Expose.IP == e {
					svc.Spec.Ports = append(svc.Spec.Ports, servicePort(p))
				}
			}
			out = append(out, svc)
		}
	}
	return out, nil
}

// keptRevisions is the revisionHistoryLimit a service's Deployment gets:
// the manifest's, at most MaxRevisionHistoryLimit (issue 35.5: unbounded,
// each deploy left one more ReplicaSet in etcd). Held here rather than
// refused by validation, so that no lease's own manifest of before the
// bound is refused on its way back (a placement returning a cluster to
// it, a retry).
func keptRevisions(n *int32) *int32 {
	if n == nil {
		return nil
	}
	kept := min(*n, MaxRevisionHistoryLimit)
	return &kept
}
