package manifest

import (
	corev1 "k8s.io/api/core/v1"
)

// A canary's traffic by route weight (issue 38.4): with --routing gateway,
// a canary service's HTTPRoutes send its requests to two Services, the
// stable one and the canary one, each pinned by the rollout to one
// version's pods (pod-template-hash, as a blue-green's are); a setWeight
// step sets the routes' backend weights. Without a Gateway the weight is
// a share of the replicas only.

// Suffixes of a traffic-routed canary's two Services.
const (
	StableSuffix = "-stable"
	CanarySuffix = "-canary"
)

// Roles of a traffic-routed canary's Services (RoleLabel).
const (
	RoleStable = "stable"
	RoleCanary = "canary"
)

// MaxScaleDownDelaySeconds bounds a canary's scaleDownDelaySeconds.
const MaxScaleDownDelaySeconds = 3600

// StableService is the name of service svc's stable Service.
func StableService(svc string) string { return svc + StableSuffix }

// CanaryService is the name of service svc's canary Service.
func CanaryService(svc string) string { return svc + CanarySuffix }

// TrafficRouted reports whether s's canary steps set route weights where
// the operator routes through a Gateway: a canary with an HTTP hostname.
// A stateful service's canary is not: its weight is the ordinals it
// released, behind the one Service that selects every pod.
func (s *Service) TrafficRouted() bool {
	return s.Rollout != nil && s.Rollout.Strategy == StrategyCanary && s.hasHostname() && !s.Stateful()
}

// RouteSwitched reports whether s's blue-green switch is a change of its
// routes' backends where the operator routes through a Gateway: a
// blue-green service with an HTTP hostname. Its routes send every request
// to its active Service (weight 100) and none to its preview Service
// (weight 0); the switch moves them to the preview, once it selects the
// new version, and back to the active one once that selects it too.
func (s *Service) RouteSwitched() bool {
	return s.Rollout != nil && s.Rollout.Strategy == StrategyBlueGreen && s.hasHostname()
}

// RouteWeighted reports whether the rollout of s sets its routes'
// backend weights (TrafficRouted or RouteSwitched).
func (s *Service) RouteWeighted() bool { return s.TrafficRouted() || s.RouteSwitched() }

// RouteBackends are the two Services the routes of a RouteWeighted
// service weigh, in order: the stable and the canary Service of a canary,
// the active and the preview Service of a blue-green.
func RouteBackends(svc string, blueGreen bool) (string, string) {
	if blueGreen {
		return svc, PreviewService(svc)
	}
	return StableService(svc), CanaryService(svc)
}

// hasHostname reports whether a port of s is exposed over HTTP with a
// hostname.
func (s *Service) hasHostname() bool {
	for _, p := range s.Ports {
		if p.Expose != nil && p.Expose.HTTP != nil && len(p.Expose.HTTP.Hostnames) > 0 {
			return true
		}
	}
	return false
}

// TrafficServices are the stable and canary Services of each
// traffic-routed canary service (TrafficRouted), in manifest order: the
// service's ClusterIP Service under another name and role, selecting every
// pod of the service until the rollout pins it to a version.
func (m *Manifest) TrafficServices() []*corev1.Service {
	d := m.defaulted()
	if d == nil {
		return nil
	}
	var out []*corev1.Service
	for _, s := range d.Services {
		if !s.TrafficRouted() {
			continue
		}
		for _, side := range []struct{ name, role string }{{StableService(s.Name), RoleStable}, {CanaryService(s.Name), RoleCanary}} {
			svc := service(d.Lease, side.name, s.Name)
			svc.Spec.Type = corev1.ServiceTypeClusterIP
			for _, p := range s.Ports {
				svc.Spec.Ports = append(svc.Spec.Ports, servicePort(p))
			}
			pinned(svc, side.role)
			out = append(out, svc)
		}
	}
	return out
}
