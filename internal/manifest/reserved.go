package manifest

import (
	"maps"
	"slices"
	"strings"
)

// Reserved label and annotation keys (issue 20.5): a tenant's pod labels
// and annotations, and its analysis Jobs' pod annotations, may not use a
// prefix the platform gives meaning to. kubernetes.io and k8s.io keys steer
// the cluster (AppArmor and seccomp profiles, the restart annotation),
// deployflow.dev keys steer deployflow, and a mesh's keys inject or skip
// its sidecar. The operator sets the list (--reserved-key-prefixes) and the
// keys allowed anyway (--allow-pod-keys: the local stack's kwok knobs).

// DefaultReservedPrefixes are the reserved key prefixes unless the
// operator sets others. A prefix reserves itself and every subdomain
// (kubernetes.io reserves container.apparmor.security.beta.kubernetes.io).
var DefaultReservedPrefixes = []string{"kubernetes.io", "k8s.io", "deployflow.dev", "istio.io", "linkerd.io", "kuma.io", "consul.hashicorp.com"}

// AlwaysAllowedKeys are reserved keys a manifest may carry whatever the
// operator says: Kubernetes' recommended labels, and the restart
// annotation deployflow itself writes into a lease's manifest (restart).
var AlwaysAllowedKeys = []string{
	"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
	"app.kubernetes.io/component", "app.kubernetes.io/part-of",
	"kubectl.kubernetes.io/restartedAt",
}

// reservedBy is the reserved prefix key falls under, or "".
func reservedBy(key string, prefixes []string) string {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	prefix = strings.ToLower(prefix)
	for _, p := range prefixes {
		p = strings.ToLower(strings.TrimSpace(p))
		if p != "" && (prefix == p || strings.HasSuffix(prefix, "."+p)) {
			return p
		}
	}
	return ""
}

// Pod keys are an allowlist (issue 35.5): a key without a prefix is the
// tenant's own; a prefixed key only where the operator allows it, by its
// exact key or by its prefix ("example.com/" in --allow-pod-keys allows
// every example.com/ key), or where Kubernetes recommends it
// (AlwaysAllowedKeys). A prefix allowed never opens a reserved one: only
// an exact key does (the local stack's kwok knobs). Before, only the
// reserved prefixes were refused, so CNI, node-agent and scraper keys
// (IP pinning, extra network attachments, eviction pins, scrape opt-ins)
// reached the pods.

// CheckReservedKeys returns a *ValidationError naming each tenant-set pod
// label or annotation (and analysis Job pod annotation) that is not the
// tenant's own or allowed, or nil. Nil prefixes are
// DefaultReservedPrefixes; allowed holds exact keys and prefixes ending in
// "/".
func (m *Manifest) CheckReservedKeys(prefixes, allowed []string) error {
	var v problems
	policy := newKeyPolicy(prefixes, allowed)
	check := func(path string, keys map[string]string) { policy.check(&v, path, keys) }
	job := func(path string, a *Analysis) {
		if a != nil && a.Job != nil {
			check(field(path, "job.podAnnotations"), a.Job.PodAnnotations)
		}
	}
	for i := range m.Services {
		s := &m.Services[i]
		p := index("services", i)
		check(field(p, "podLabels"), s.PodLabels)
		check(field(p, "podAnnotations"), s.PodAnnotations)
		if r := s.Rollout; r != nil {
			rp := field(p, "rollout")
			for j, st := range r.Steps {
				job(field(index(field(rp, "steps"), j), "analysis"), st.Analysis)
			}
			job(field(rp, "analysis"), r.Analysis)
			if bg := r.BlueGreen; bg != nil {
				job(field(rp, "blueGreen.prePromotionAnalysis"), bg.PrePromotionAnalysis)
				job(field(rp, "blueGreen.postPromotionAnalysis"), bg.PostPromotionAnalysis)
			}
		}
	}
	if p := m.Placement; p != nil {
		for i, w := range p.Waves {
			job(field(index("placement.waves", i), "analysis"), w.Analysis)
		}
	}
	return v.err()
}

// keyPolicy is which prefixed pod keys a tenant may set: none under a
// reserved prefix but the exact keys allowed, others only under an
// allowed prefix.
type keyPolicy struct {
	reserved   []string
	exact      map[string]bool
	okPrefixes []string
}

// newKeyPolicy is the policy of the operator's reserved prefixes (nil:
// DefaultReservedPrefixes) and allowed keys (exact keys, and prefixes
// ending in "/").
func newKeyPolicy(prefixes, allowed []string) keyPolicy {
	if prefixes == nil {
		prefixes = DefaultReservedPrefixes
	}
	p := keyPolicy{reserved: prefixes, exact: map[string]bool{}}
	for _, k := range append(slices.Clone(AlwaysAllowedKeys), allowed...) {
		k = strings.TrimSpace(k)
		if pre, ok := strings.CutSuffix(k, "/"); ok && pre != "" {
			p.okPrefixes = append(p.okPrefixes, strings.ToLower(pre))
			continue
		}
		p.exact[k] = true
	}
	return p
}

// check adds a problem for each key of keys (at path) the policy refuses.
func (p keyPolicy) check(v *problems, path string, keys map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		prefix, name, prefixed := strings.Cut(k, "/")
		switch {
		case !prefixed || p.exact[k]:
		case reservedBy(k, p.reserved) != "":
			v.add(key(path, k), "the prefix %s is reserved (it steers the cluster, deployflow or a mesh): use a key without a prefix, such as %s", reservedBy(k, p.reserved), name)
		case !slices.Contains(p.okPrefixes, strings.ToLower(prefix)):
			v.add(key(path, k), "the prefix %s is not one tenants may use (it may steer the network plugin, a node agent or a scraper): use a key without a prefix, such as %s, or ask the operator to allow %s/ (--allow-pod-keys)", prefix, name, prefix)
		}
	}
}
