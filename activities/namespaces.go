package activities

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/internal/manifest"
)

// ErrNamespaceNotAllowed: a workflow asked deployflow to act in a namespace
// it does not manage. deployflow writes only in namespaces labelled
// app.kubernetes.io/managed-by=deployflow (the lease namespaces it creates)
// and in those the worker lists in --rollout-namespaces.
const ErrNamespaceNotAllowed = "NamespaceNotAllowed"

// allowedCacheTTL is how long a namespace found to be ours is trusted
// without reading it again.
const allowedCacheTTL = 30 * time.Second

// namespaceGuard remembers the namespaces recently found to be ours, so the
// check costs one read per namespace and TTL, not one per write.
type namespaceGuard struct {
	mu      sync.Mutex
	allowed map[string]time.Time // name -> when it was last found ours
}

func (a *Activities) listed(ns string) bool { return slices.Contains(a.RolloutNamespaces, ns) }

// ManagedNamespace reports whether a namespace's labels make it deployflow's.
func ManagedNamespace(ns *corev1.Namespace) bool {
	return ns.Labels[manifest.ManagedByLabel] == manifest.ManagedBy
}

func notAllowed(ns, why string) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("namespace %s: %s; deployflow acts only in the lease namespaces it manages (labelled %s=%s) and in the namespaces listed in the worker's --rollout-namespaces",
			ns, why, manifest.ManagedByLabel, manifest.ManagedBy),
		ErrNamespaceNotAllowed, nil, ns)
}

// allowNamespace returns nil if deployflow may write in ns: it is listed in
// RolloutNamespaces, or it exists and is labelled as deployflow's. Anything
// else is a non-retryable NamespaceNotAllowed; an unreachable API server is
// an ordinary (retried) error.
func (a *Activities) allowNamespace(ctx context.Context, ns string) error {
	if ns == "" {
		return invalidInput("namespace is empty")
	}
	if a.listed(ns) {
		return nil
	}
	a.guard.mu.Lock()
	at, ok := a.guard.allowed[ns]
	a.guard.mu.Unlock()
	if ok && time.Since(at) < allowedCacheTTL {
		return nil
	}
	got, err := a.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return notAllowed(ns, "does not exist and is not listed in --rollout-namespaces")
	case err != nil:
		return fmt.Errorf("get namespace %s: %w", ns, err)
	case !ManagedNamespace(got):
		return notAllowed(ns, "is not managed by deployflow")
	}
	a.guard.mu.Lock()
	if a.guard.allowed == nil {
		a.guard.allowed = map[string]time.Time{}
	}
	a.guard.allowed[ns] = time.Now()
	a.guard.mu.Unlock()
	return nil
}

// leaseNamespace reports the lease whose namespace ns is, from the labels
// deployflow asks it to carry: a lease namespace is named
// manifest.Namespace(lease) and labelled with that lease.
func leaseNamespace(name string, labels map[string]string) (string, bool) {
	lease := labels[manifest.LeaseLabel]
	return lease, lease != "" && name == manifest.Namespace(lease)
}
