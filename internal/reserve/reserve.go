// Package reserve holds what a lease reserves cluster-wide: its hostnames and
// its declared IP addresses, following the Akash provider's rules.
//
// Every reservation is a cluster-scoped custom resource (k8s/crds) whose
// object NAME is the thing reserved — the hostname, or the IP address — so
// the API server itself makes it exclusive: of several leases creating the
// same reservation at once exactly one Create succeeds and the others get
// AlreadyExists. Nothing here takes a reservation over (the schema makes
// their spec immutable): a reservation is created by its lease and deleted
// only by it, with a UID and resourceVersion precondition so a reservation
// re-created by another lease in between is never deleted. The one update:
// in a hostname store shared by several clusters (shared.go), the labels
// that record which clusters use a reservation.
//
// All operations are safe to retry. API errors are returned wrapped with
// context (apierrors.IsXxx still sees them), so callers can retry transient
// ones.
package reserve

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/k8s/crds"
)

// specString is spec.<field> of a reservation, "" when unset.
func specString(u *unstructured.Unstructured, field string) string {
	s, _, _ := unstructured.NestedString(u.Object, "spec", field)
	return s
}

func validateHolder(leaseID, owner string) error {
	if err := lease.ValidateID(leaseID); err != nil {
		return err
	}
	return lease.ValidateOwner(owner)
}

// listAll lists every object of res matching selector, page by page.
func listAll(ctx context.Context, res dynamic.ResourceInterface, selector string) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector, Limit: 500}
	for {
		list, err := res.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

// listHeld lists the reservations held by leaseID: labelled with it, and
// with it in spec.lease (the label alone is not trusted).
func listHeld(ctx context.Context, res dynamic.ResourceInterface, leaseID string) ([]unstructured.Unstructured, error) {
	items, err := listAll(ctx, res, labels.Set{crds.LabelLease: leaseID}.String())
	if err != nil {
		return nil, err
	}
	out := items[:0]
	for _, u := range items {
		if specString(&u, "lease") == leaseID {
			out = append(out, u)
		}
	}
	return out, nil
}

// deleteHeld deletes the reservation u if it is (still) held by leaseID. The
// delete carries u's UID and resourceVersion as preconditions; when they no
// longer match, the object is read again and checked again, so a reservation
// that was released and re-created by another lease meanwhile is left alone.
// An object already gone is success.
func deleteHeld(ctx context.Context, res dynamic.ResourceInterface, u *unstructured.Unstructured, leaseID string) error {
	for attempt := 0; ; attempt++ {
		if u == nil {
			return nil
		}
		if specString(u, "lease") != leaseID {
			return nil
		}
		name, uid, rv := u.GetName(), u.GetUID(), u.GetResourceVersion()
		pre := &metav1.Preconditions{UID: &uid}
		if rv != "" {
			pre.ResourceVersion = &rv
		}
		err := res.Delete(ctx, name, metav1.DeleteOptions{Preconditions: pre})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return fmt.Errorf("release %s: %w", name, err)
		}
		if u, err = getIfExists(ctx, res, name); err != nil {
			return fmt.Errorf("release %s: %w", name, err)
		}
	}
}

// deleteHeldByName is deleteHeld for an object known by name.
func deleteHeldByName(ctx context.Context, res dynamic.ResourceInterface, name, leaseID string) error {
	u, err := getIfExists(ctx, res, name)
	if err != nil {
		return fmt.Errorf("release %s: %w", name, err)
	}
	return deleteHeld(ctx, res, u, leaseID)
}

// getIfExists is Get with NotFound as (nil, nil).
func getIfExists(ctx context.Context, res dynamic.ResourceInterface, name string) (*unstructured.Unstructured, error) {
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return u, err
}

// deleteAllHeld deletes every given reservation still held by leaseID and
// joins the errors.
func deleteAllHeld(ctx context.Context, res dynamic.ResourceInterface, items []unstructured.Unstructured, leaseID string) error {
	var errs []error
	for i := range items {
		if err := deleteHeld(ctx, res, &items[i], leaseID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// releaseAll deletes every reservation of res the lease holds; what names
// them in errors.
func releaseAll(ctx context.Context, res dynamic.ResourceInterface, leaseID, what string) error {
	if err := lease.ValidateID(leaseID); err != nil {
		return err
	}
	items, err := listHeld(ctx, res, leaseID)
	if err != nil {
		return fmt.Errorf("list %s of lease %s: %w", what, leaseID, err)
	}
	return deleteAllHeld(ctx, res, items, leaseID)
}
