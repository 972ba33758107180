package observe

import (
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// What the observer sees of a lease, pure: the lease's workflow decides
// what it means (workflows/lease/observe.go).

// ServiceHealth is one service's availability.
type ServiceHealth struct {
	Service   string `json:"service"`
	Desired   int32  `json:"desired"`
	Available int32  `json:"available"`
}

// Observation is what is seen of one lease in the cluster: whether its
// record is still active, and each service's available replicas. The
// worker's observer sends it to the lease's workflow (the "observe" update)
// when it changes; the workflow's safety-net tick reads it (ObserveLease).
// The workflow decides what it means against the manifest it deployed.
type Observation struct {
	Lease string `json:"lease"`
	// Closed: the lease record is closed or gone.
	Closed bool `json:"closed,omitempty"`
	// Unknown: the cluster could not be observed (the observer's watches
	// have failed for longer than its threshold). Never "unhealthy".
	Unknown bool `json:"unknown,omitempty"`
	// Services are the services that have ReplicaSets, by name.
	Services map[string]ServiceHealth `json:"services,omitempty"`
	// Since is when the observer first saw a service below its desired
	// replicas (zero while all are at it): the workflow counts its
	// degradedAfter from there.
	Since time.Time `json:"since,omitzero"`
	// At is when the observer read it from its cache (zero from an
	// observer that predates it): a send answered late can reach a
	// workflow's next run, and what was read before that run started is
	// the deploy's rollout, not the lease now.
	At time.Time `json:"at,omitzero"`
}

// Key is what tells two observations apart for the lease's workflow: the
// lease's state and which services are below their desired replicas (by
// the ReplicaSets' desired-replicas annotation, which a hand-made scale does
// not change). Pod churn that keeps every service available is not a
// change.
func (o *Observation) Key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "closed=%t unknown=%t", o.Closed, o.Unknown)
	names := make([]string, 0, len(o.Services))
	for n := range o.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := o.Services[n]
		fmt.Fprintf(&b, " %s:%t", n, h.Available >= h.Desired)
	}
	return b.String()
}

// Healthy reports whether every service has at least its desired replicas
// available.
func (o *Observation) Healthy() bool {
	for _, h := range o.Services {
		if h.Available < h.Desired {
			return false
		}
	}
	return true
}

// ObserveReplicaSets sums each service's ReplicaSets of one lease: desired
// is the desired-replicas annotation of its newest revision (the rollout
// engine writes the Deployment's replicas there, and a hand-made scale of
// spec.replicas does not change it), or the spec's sum where it has none;
// available is the sum of available replicas, each ReplicaSet's at most its
// spec's replicas: a ReplicaSet scaled down counts the pods it is deleting
// as available until its controller's cache has their deletion (its status,
// observedGeneration current, says 3 available for a spec of 0), and those
// pods are going.
func ObserveReplicaSets(rsList []*appsv1.ReplicaSet) map[string]ServiceHealth {
	out := map[string]ServiceHealth{}
	newest := map[string]*appsv1.ReplicaSet{}
	for _, rs := range rsList {
		svc := rs.Labels[manifest.ServiceLabel]
		if svc == "" || rs.DeletionTimestamp != nil {
			continue
		}
		h := out[svc]
		h.Service = svc
		available := rs.Status.AvailableReplicas
		if r := rs.Spec.Replicas; r != nil && *r < available {
			available = *r
		}
		h.Available += available
		if rs.Spec.Replicas != nil {
			h.Desired += *rs.Spec.Replicas
		}
		out[svc] = h
		rev, _ := rollout.Revision(rs)
		if cur, ok := newest[svc]; !ok || rev > mustRevision(cur) {
			newest[svc] = rs
		}
	}
	for svc, rs := range newest {
		if d, ok := rollout.GetDesiredReplicasAnnotation(rs); ok {
			h := out[svc]
			h.Desired = d
			out[svc] = h
		}
	}
	return out
}

// ObserveStatefulSets adds each stateful service's StatefulSet of one
// lease to services (issue 39): desired is its spec's replicas, available
// its status's, at most the spec's (a status written before a scale-down
// reached it counts no more than the spec asks, as a ReplicaSet's).
func ObserveStatefulSets(services map[string]ServiceHealth, stsList []*appsv1.StatefulSet) {
	for _, sts := range stsList {
		svc := sts.Labels[manifest.ServiceLabel]
		if svc == "" || sts.DeletionTimestamp != nil {
			continue
		}
		h := services[svc]
		h.Service = svc
		desired := int32(1)
		if sts.Spec.Replicas != nil {
			desired = *sts.Spec.Replicas
		}
		h.Desired += desired
		h.Available += min(sts.Status.AvailableReplicas, desired)
		services[svc] = h
	}
}

func mustRevision(rs *appsv1.ReplicaSet) int64 {
	rev, _ := rollout.Revision(rs)
	return rev
}

// ObserveResult is the "observe" update's answer: when the observer should
// send the same observation again (a service below its replicas turns the
// lease Degraded only after degradedAfter), zero for never.
type ObserveResult struct {
	RecheckAfter time.Duration `json:"recheckAfter,omitempty"`
}
