package lease

import (
	"context"
	"fmt"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/deployflow/deployflow/k8s/crds"
)

// KubeStore is a Store kept in Lease custom resources (cluster-scoped, named
// after the lease id, labelled deployflow.dev/owner). Install the CRDs first
// (crds.Install).
//
// API errors other than NotFound are returned as they are, so callers can tell
// transient ones (apierrors.IsServerTimeout, ...) and retry.
type KubeStore struct {
	res dynamic.NamespaceableResourceInterface
	now func() time.Time
}

var _ Store = (*KubeStore)(nil)

// NewKubeStore returns a Store backed by the Lease custom resource.
func NewKubeStore(dyn dynamic.Interface) *KubeStore {
	return &KubeStore{res: dyn.Resource(crds.Leases), now: time.Now}
}

// Get implements Store.
func (s *KubeStore) Get(ctx context.Context, id string) (*Lease, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	u, err := s.res.Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return nil, mapNotFound(id, err)
	}
	return FromObject(u)
}

// Create implements Store.
func (s *KubeStore) Create(ctx context.Context, id, owner string) (*Lease, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	if err := ValidateOwner(owner); err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crds.APIVersion,
		"kind":       crds.KindLease,
		"metadata": map[string]any{
			"name":   id,
			"labels": map[string]any{crds.LabelOwner: owner},
		},
		"spec": map[string]any{"owner": owner, "state": string(StateActive)},
	}}
	// A lease deleted between our Create and Get is created again.
	for attempt := 0; ; attempt++ {
		u, err := s.res.Create(ctx, obj, metav1.CreateOptions{FieldManager: crds.FieldManager})
		if err == nil {
			return FromObject(u)
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		u, err = s.res.Get(ctx, id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		l, err := FromObject(u)
		if err != nil {
			return nil, err
		}
		if l.Owner != owner {
			return nil, fmt.Errorf("create lease %s for owner %s: %w (%s)", id, owner, ErrOwnerMismatch, l.Owner)
		}
		return l, nil
	}
}

// Close implements Store.
func (s *KubeStore) Close(ctx context.Context, id string) (*Lease, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	var out *Lease
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := s.res.Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			return err
		}
		l, err := FromObject(u)
		if err != nil {
			return err
		}
		if l.State == StateClosed {
			out = l
			return nil
		}
		closedAt := s.now().UTC().Truncate(time.Second)
		if err := unstructured.SetNestedField(u.Object, string(StateClosed), "spec", "state"); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, closedAt.Format(time.RFC3339), "spec", "closedAt"); err != nil {
			return err
		}
		// The resourceVersion in u makes this a compare-and-swap.
		u, err = s.res.Update(ctx, u, metav1.UpdateOptions{FieldManager: crds.FieldManager})
		if err != nil {
			return err
		}
		out, err = FromObject(u)
		return err
	})
	if err != nil {
		return nil, mapNotFound(id, err)
	}
	return out, nil
}

// List implements Store.
func (s *KubeStore) List(ctx context.Context) ([]Lease, error) {
	var out []Lease
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := s.res.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			l, err := FromObject(&list.Items[i])
			if err != nil {
				return nil, err
			}
			out = append(out, *l)
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func mapNotFound(id string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("lease %s: %w", id, ErrNotFound)
	}
	return err
}

// FromObject reads a Lease record (as the API server or an informer has it).
func FromObject(u *unstructured.Unstructured) (*Lease, error) {
	owner, _, _ := unstructured.NestedString(u.Object, "spec", "owner")
	state, _, _ := unstructured.NestedString(u.Object, "spec", "state")
	l := &Lease{ID: u.GetName(), Owner: owner, State: State(state), UID: string(u.GetUID())}
	if l.State != StateActive && l.State != StateClosed {
		// Not "not active": a record this worker cannot read says nothing
		// of whether the tenant's lease ended.
		return nil, fmt.Errorf("lease %s: spec.state %q is neither %s nor %s: %w", l.ID, state, StateActive, StateClosed, ErrMalformed)
	}
	if s, ok, _ := unstructured.NestedString(u.Object, "spec", "closedAt"); ok && s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, fmt.Errorf("lease %s: spec.closedAt %q: %w (%w)", l.ID, s, ErrMalformed, err)
		}
		l.ClosedAt = &t
	}
	return l, nil
}
