package manifest

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// WithDefaults returns a deep copy of m with every default filled in:
// replicas 1; each port's targetPort = port and protocol TCP; a rollout with
// strategy RollingUpdate, maxSurge and maxUnavailable 25% (rolling updates
// only), progressDeadlineSeconds 600, revisionHistoryLimit 10 and
// autoRollback true. Empty lists and maps become nil and empty resources are
// dropped, so a defaulted manifest survives a JSON round trip unchanged.
//
// WithDefaults is idempotent and never modifies m. It does not validate: an
// invalid manifest stays invalid.
func (m *Manifest) WithDefaults() *Manifest {
	if m == nil {
		return nil
	}
	out := &Manifest{Lease: m.Lease, RequireApproval: m.RequireApproval}
	if m.Services != nil {
		out.Services = make([]Service, len(m.Services))
		for i := range m.Services {
			out.Services[i] = m.Services[i].withDefaults()
		}
	}
	return out
}

// HasDefaults reports whether every default WithDefaults fills in is there
// already: the manifest came from WithDefaults (or was written in full). A
// deploy fills the defaults once, where its chain starts
// (workflows/lease/chain.go); the steps after it check them with
// HasDefaults instead of filling them again.
func (m *Manifest) HasDefaults() bool {
	if m == nil {
		return false
	}
	for _, s := range m.Services {
		r := s.Rollout
		if s.Replicas == nil || r == nil || r.Strategy == "" || r.ProgressDeadlineSeconds == nil ||
			r.RevisionHistoryLimit == nil || r.AutoRollback == nil {
			return false
		}
		if (r.Strategy == StrategyRollingUpdate || r.Strategy == StrategyCanary || r.Strategy == StrategyBlueGreen) &&
			(r.MaxSurge == nil || r.MaxUnavailable == nil) {
			return false
		}
		for _, p := range s.Ports {
			if p.TargetPort == 0 || p.Protocol == "" {
				return false
			}
		}
	}
	return true
}

// defaulted is m when its defaults are there, else a filled copy (for
// callers that convert a manifest as written).
// Callers must not modify the result.
func (m *Manifest) defaulted() *Manifest {
	if m.HasDefaults() {
		return m
	}
	return m.WithDefaults()
}

// withDefaults is WithDefaults for one service.
func (s *Service) withDefaults() Service {
	out := Service{
		Name:                s.Name,
		Image:               s.Image,
		Replicas:            ptrOr(s.Replicas, DefaultReplicas),
		Command:             cloneSlice(s.Command),
		Args:                cloneSlice(s.Args),
		Env:                 cloneMap(s.Env),
		PodLabels:           cloneMap(s.PodLabels),
		PodAnnotations:      cloneMap(s.PodAnnotations),
		Security:            s.Security.clone(),
		ReadinessProbe:      s.ReadinessProbe.clone(),
		LivenessProbe:       s.LivenessProbe.clone(),
		StartupProbe:        s.StartupProbe.clone(),
		Credentials:         s.Credentials.clone(),
		SecretEnv:           cloneMap(s.SecretEnv),
		Volumes:             cloneSlice(s.Volumes),
		PodManagementPolicy: s.PodManagementPolicy,
	}
	if r := s.Resources; r != nil && (r.CPU != "" || r.Memory != "" || r.EphemeralStorage != "" || r.GPU != nil) {
		out.Resources = &Resources{CPU: r.CPU, Memory: r.Memory, EphemeralStorage: r.EphemeralStorage, GPU: r.GPU.clone()}
	}
	if len(s.Ports) > 0 {
		out.Ports = make([]Port, len(s.Ports))
		for i, p := range s.Ports {
			out.Ports[i] = p.withDefaults()
		}
	}
	out.Rollout = s.Rollout.withDefaults()
	return out
}

func (p Port) withDefaults() Port {
	if p.TargetPort == 0 {
		p.TargetPort = p.Port
	}
	if p.Protocol == "" {
		p.Protocol = DefaultProtocol
	}
	if e := p.Expose; e != nil {
		p.Expose = &Expose{IP: e.IP}
		if e.HTTP != nil {
			p.Expose.HTTP = &HTTPExpose{Hostnames: cloneSlice(e.HTTP.Hostnames)}
		}
	}
	return p
}

// withDefaults returns a filled copy of r; r may be nil.
func (r *Rollout) withDefaults() *Rollout {
	out := &Rollout{}
	if r != nil {
		*out = *r
		out.MaxSurge = clonePtr(r.MaxSurge)
		out.MaxUnavailable = clonePtr(r.MaxUnavailable)
		out.ProgressDeadlineSeconds = clonePtr(r.ProgressDeadlineSeconds)
		out.RevisionHistoryLimit = clonePtr(r.RevisionHistoryLimit)
		out.AutoRollback = clonePtr(r.AutoRollback)
		out.ScaleDownDelaySeconds = clonePtr(r.ScaleDownDelaySeconds)
		out.Steps = append([]CanaryStep(nil), r.Steps...)
		if r.BlueGreen != nil {
			b := *r.BlueGreen
			b.ScaleDownDelaySeconds = clonePtr(b.ScaleDownDelaySeconds)
			b.PreviewReplicaCount = clonePtr(b.PreviewReplicaCount)
			out.BlueGreen = &b
		}
	}
	if out.Strategy == "" {
		out.Strategy = DefaultStrategy
	}
	if out.Strategy == StrategyRollingUpdate || out.Strategy == StrategyCanary || out.Strategy == StrategyBlueGreen {
		if out.MaxSurge == nil {
			v := intstr.FromString(DefaultMaxSurge)
			out.MaxSurge = &v
		}
		if out.MaxUnavailable == nil {
			v := intstr.FromString(DefaultMaxUnavailable)
			out.MaxUnavailable = &v
		}
	}
	out.ProgressDeadlineSeconds = ptrOr(out.ProgressDeadlineSeconds, DefaultProgressDeadlineSeconds)
	out.RevisionHistoryLimit = ptrOr(out.RevisionHistoryLimit, DefaultRevisionHistoryLimit)
	out.AutoRollback = ptrOr(out.AutoRollback, DefaultAutoRollback)
	return out
}

// ptrOr returns a copy of p, or a pointer to def when p is nil.
func ptrOr[T any](p *T, def T) *T {
	if p != nil {
		v := *p
		return &v
	}
	return &def
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// cloneSlice copies s; nil when s is empty.
func cloneSlice[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

// cloneMap copies m; nil when m is empty.
func cloneMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}
