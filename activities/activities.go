// Package activities holds every deployflow step that talks to the outside
// world (the Kubernetes API). Each activity is safe to retry: creates
// tolerate AlreadyExists, deletes tolerate NotFound, updates carry
// resourceVersion preconditions, and waits start from a fresh list.
//
// Kubernetes API failures are returned as ordinary (retryable) errors, so an
// unreachable API server is retried by the activity's retry policy and never
// read as "the workload failed". Failures that retrying cannot fix are
// non-retryable application errors with a stable type (see errors.go).
package activities

import (
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/metrics"
	"github.com/deployflow/deployflow/internal/reserve"
)

// Activities are registered on the worker as one struct; the Temporal
// activity names are the method names (EnsureNamespace, ...).
type Activities struct {
	Kube      kubernetes.Interface
	Leases    lease.Store
	Hostnames *reserve.Hostnames
	IPs       *reserve.IPs
	Metrics   *metrics.Metrics // optional
	// RolloutNamespaces are namespaces, besides the lease namespaces
	// deployflow manages, where rollouts may act (--rollout-namespaces).
	RolloutNamespaces []string
	// Gateway is the operator's Gateway (--routing gateway): a lease's
	// hostnames become HTTPRoutes on it instead of an Ingress (nil: the
	// Ingress). The worker's own cluster's: OnCluster leaves it unset, so
	// a lease on another cluster (--clusters) routes through its Ingress.
	Gateway *GatewayRouting
	// Observer is the worker's shared view of the leases (optional): the
	// safety-net tick reads it instead of the API server.
	Observer LeaseObserver
	// Prometheus is what canary analyses query (--prometheus-url;
	// optional: without it they are inconclusive).
	Prometheus PrometheusAPI
	// PrometheusLabel is the label carrying a series' namespace, which
	// every analysis query is confined to (--prometheus-namespace-label,
	// default "namespace").
	PrometheusLabel string
	// HTTPCheckAllow are the hosts analyses' HTTP checks may GET besides
	// the lease's own Services (--http-check-allow).
	HTTPCheckAllow []string
	// ClusterDomain is the cluster's DNS domain (--cluster-domain, default
	// cluster.local): <svc>.<ns>.svc.<ClusterDomain> names a lease Service.
	ClusterDomain string
	// Notifier posts canary events to a webhook (--notify-url; optional).
	Notifier *Notifier
	// Limits bound what one lease's manifest may take (--max-*; zero
	// values are manifest.DefaultLimits).
	Limits manifest.Limits
	// ReservedPrefixes are the label/annotation prefixes a tenant's pods
	// may not use (nil: manifest.DefaultReservedPrefixes); AllowedPodKeys
	// the reserved keys allowed anyway (--allow-pod-keys).
	ReservedPrefixes, AllowedPodKeys []string
	// Namespace is the profile every lease namespace gets: Pod Security
	// level, ResourceQuota, LimitRange (zero: config's defaults).
	Namespace config.NamespaceProfile
	// MountServiceAccountToken lets a lease's pods mount their namespace's
	// service account token (--mount-service-account-token; off).
	MountServiceAccountToken bool
	// LeasesElsewhere: the lease records are in another cluster than Kube's
	// (a --clusters cluster's activities). Its lease namespaces carry no
	// owner reference to them: this cluster's garbage collector would find
	// the owner missing and delete the namespace. The lease's workflow of
	// that cluster tears it down when the lease closes.
	LeasesElsewhere bool

	guard namespaceGuard
}

// OnCluster is a's activities acting on another cluster (the worker's
// --clusters, issue 23.1): its workload through kube, its hostname and IP
// reservations there; everything else is a's (the lease records, limits,
// analyses' clients). The safety-net ticks and rollout waits read that
// cluster's observer, set as Observer once it runs (nil: the API server).
// Where a routes through a Gateway (--routing gateway), so do the
// cluster's leases: their HTTPRoutes, written through dyn, are parented to
// the Gateway of the same namespace and name in that cluster.
// (A function, not a method: every method of Activities is an activity.)
func OnCluster(a *Activities, kube kubernetes.Interface, dyn dynamic.Interface, hostnames *reserve.Hostnames, ips *reserve.IPs) *Activities {
	var gw *GatewayRouting
	if a.Gateway != nil {
		gw = &GatewayRouting{Ref: a.Gateway.Ref, Dynamic: dyn, AcceptTimeout: a.Gateway.AcceptTimeout}
	}
	return &Activities{
		Kube: kube, Hostnames: hostnames, IPs: ips, LeasesElsewhere: true, Gateway: gw,
		Leases:                   a.Leases,
		Metrics:                  a.Metrics,
		RolloutNamespaces:        a.RolloutNamespaces,
		Prometheus:               a.Prometheus,
		PrometheusLabel:          a.PrometheusLabel,
		HTTPCheckAllow:           a.HTTPCheckAllow,
		ClusterDomain:            a.ClusterDomain,
		Notifier:                 a.Notifier,
		Limits:                   a.Limits,
		ReservedPrefixes:         a.ReservedPrefixes,
		AllowedPodKeys:           a.AllowedPodKeys,
		Namespace:                a.Namespace,
		MountServiceAccountToken: a.MountServiceAccountToken,
	}
}
