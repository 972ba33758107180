package activities

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/observe"
)

// ObserveLease is the safety-net tick's observation of a lease: from the
// worker's shared informers when they are in sync (no API request), else
// read from the API server. An API server that cannot be reached is an
// error (the workflow reads it as Unknown), never a closed lease.
func (a *Activities) ObserveLease(ctx context.Context, id string) (*observe.Observation, error) {
	if a.Observer != nil {
		if o, ok := a.Observer.Observe(ctx, id); ok {
			return o, nil
		}
	}
	o := &observe.Observation{Lease: id}
	l, err := a.Leases.Get(ctx, id)
	switch {
	case errors.Is(err, lease.ErrNotFound):
		o.Closed = true
		return o, nil
	case errors.Is(err, lease.ErrMalformed):
		o.Unknown = true // a record that does not parse is never "closed"
		return o, nil
	case err != nil:
		return nil, fmt.Errorf("read lease %s: %w", id, err)
	case !l.Active():
		o.Closed = true
		return o, nil
	}
	list, err := a.Kube.AppsV1().ReplicaSets(manifest.Namespace(id)).List(ctx, metav1.ListOptions{LabelSelector: ServiceLabel})
	if err != nil {
		return nil, fmt.Errorf("list replicasets of lease %s: %w", id, err)
	}
	rsList := make([]*appsv1.ReplicaSet, len(list.Items))
	for i := range list.Items {
		rsList[i] = &list.Items[i]
	}
	o.Services = observe.ObserveReplicaSets(rsList)
	sets, err := a.Kube.AppsV1().StatefulSets(manifest.Namespace(id)).List(ctx, metav1.ListOptions{LabelSelector: ServiceLabel})
	if err != nil {
		return nil, fmt.Errorf("list statefulsets of lease %s: %w", id, err)
	}
	stsList := make([]*appsv1.StatefulSet, len(sets.Items))
	for i := range sets.Items {
		stsList[i] = &sets.Items[i]
	}
	observe.ObserveStatefulSets(o.Services, stsList)
	return o, nil
}

// LeaseObserver is the worker's shared view of the leases (see
// internal/observe): Observe answers from its caches, ok false when they
// are not in sync.
type LeaseObserver interface {
	Observe(ctx context.Context, lease string) (*observe.Observation, bool)
}
