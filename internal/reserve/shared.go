package reserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deployflow/deployflow/k8s/crds"
)

// Global hostnames (issue 23.3, the worker's --global-hostnames): one
// store of hostname reservations, the worker's own cluster's, shared by
// every cluster the worker deploys to, so a hostname belongs to one lease
// across all of them. Each cluster reserves through its own view of the
// store (Shared); a reservation records the clusters that use it in its
// labels (UsedByLabel), and is deleted only when the last of them
// releases it. A reservation without such labels was made before the
// store was shared, by the worker's own cluster: it counts as that
// cluster's.

// UsedByPrefix starts the label that says a cluster uses a shared
// reservation: UsedByPrefix + cluster.
const UsedByPrefix = "used-by.deployflow.dev/"

// UsedByLabel is the label saying cluster uses a shared reservation.
func UsedByLabel(cluster string) string { return UsedByPrefix + cluster }

// Shared is the view of h's store that cluster reserves through, the
// store being shared by several clusters; home is the cluster that owns
// the store (its reservations from before sharing are home's).
func (h *Hostnames) Shared(cluster, home string) *Hostnames {
	v := *h
	v.cluster, v.home = cluster, home
	return &v
}

// IsShared reports whether h is a cluster's view of a shared store.
func (h *Hostnames) IsShared() bool { return h.shared() }

// SharedWith is the view of h's shared store for another cluster.
func (h *Hostnames) SharedWith(cluster string) *Hostnames { return h.Shared(cluster, h.home) }

func (h *Hostnames) shared() bool { return h.cluster != "" }

// users are the clusters u's labels say use it.
func users(u *unstructured.Unstructured) []string {
	var out []string
	for k := range u.GetLabels() {
		if c, ok := strings.CutPrefix(k, UsedByPrefix); ok {
			out = append(out, c)
		}
	}
	return out
}

// usedBy reports whether cluster uses u (a reservation from before sharing
// is home's).
func (h *Hostnames) usedBy(u *unstructured.Unstructured) bool {
	if _, ok := u.GetLabels()[UsedByLabel(h.cluster)]; ok {
		return true
	}
	return h.cluster == h.home && len(users(u)) == 0
}

// use records that h's cluster uses the reservation name the lease holds
// (created by another cluster, or before sharing). It writes the labels
// only, with the object's resourceVersion as a precondition, so it never
// takes over a reservation released and re-created meanwhile.
func (h *Hostnames) use(ctx context.Context, name, leaseID string) (added bool, err error) {
	for attempt := 0; ; attempt++ {
		u, err := getIfExists(ctx, h.res, name)
		if err != nil {
			return false, fmt.Errorf("reserve hostname %s: %w", name, err)
		}
		if u == nil || specString(u, "lease") != leaseID {
			// Released meanwhile: the caller's Reserve sees it on a retry.
			return false, fmt.Errorf("reserve hostname %s: %w", name, apierrors.NewConflict(
				crds.HostnameReservations.GroupResource(), name, errors.New("released while this cluster reserved it, try again")))
		}
		if _, ok := u.GetLabels()[UsedByLabel(h.cluster)]; ok {
			return false, nil
		}
		add := map[string]any{UsedByLabel(h.cluster): "true"}
		if len(users(u)) == 0 && h.home != h.cluster {
			add[UsedByLabel(h.home)] = "true" // made before sharing: home's
		}
		err = h.patchLabels(ctx, u, add)
		if err == nil || !apierrors.IsConflict(err) || attempt >= 5 {
			return err == nil, err
		}
	}
}

// unuse releases h's cluster's use of u, which the lease holds: the
// reservation goes once no cluster uses it. Preconditions as in use and
// deleteHeld: a reservation changed meanwhile is read again.
func (h *Hostnames) unuse(ctx context.Context, u *unstructured.Unstructured, leaseID string) error {
	for attempt := 0; ; attempt++ {
		if u == nil || specString(u, "lease") != leaseID || !h.usedBy(u) {
			return nil
		}
		others := 0
		for _, c := range users(u) {
			if c != h.cluster {
				others++
			}
		}
		var err error
		if others == 0 {
			// Once: a conflict (another cluster began to use it) reads it again.
			uid, rv := u.GetUID(), u.GetResourceVersion()
			err = h.res.Delete(ctx, u.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
			if apierrors.IsNotFound(err) {
				err = nil
			}
		} else {
			err = h.patchLabels(ctx, u, map[string]any{UsedByLabel(h.cluster): nil})
		}
		if err == nil || !apierrors.IsConflict(err) || attempt >= 5 {
			return err
		}
		name := u.GetName()
		if u, err = getIfExists(ctx, h.res, name); err != nil {
			return fmt.Errorf("release %s: %w", name, err)
		}
	}
}

// patchLabels merges labels into u's (a nil value removes one), if u is
// unchanged since it was read.
func (h *Hostnames) patchLabels(ctx context.Context, u *unstructured.Unstructured, labels map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": labels, "resourceVersion": u.GetResourceVersion(),
	}})
	if err != nil {
		return err
	}
	_, err = h.res.Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: crds.FieldManager})
	if err != nil {
		return fmt.Errorf("hostname %s: record the clusters using it: %w", u.GetName(), err)
	}
	return nil
}
