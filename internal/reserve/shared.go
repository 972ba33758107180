package reserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/k8s/crds"
)

// Global reservations (issue 23.3, the worker's --global-hostnames and
// --global-ips): one store of hostname (or IP) reservations, the worker's
// own cluster's, shared by every cluster the worker deploys to, so a
// hostname (an address) belongs to one lease across all of them, and a
// lease's endpoint has the same address in each. Each cluster reserves
// through its own view of the store (Shared); a reservation records the
// clusters that use it in its labels (UsedByLabel), and is deleted only
// when the last of them releases it. A reservation without such labels
// was made before the store was shared, by the worker's own cluster: it
// counts as that cluster's.

// UsedByPrefix starts the label that says a cluster uses a shared
// reservation: UsedByPrefix + cluster.
const UsedByPrefix = "used-by.deployflow.dev/"

// UsedByLabel is the label saying cluster uses a shared reservation.
func UsedByLabel(cluster string) string { return UsedByPrefix + cluster }

// sharing is a cluster's view of a store shared by several clusters: the
// cluster it reserves for, and home, the cluster that owns the store (its
// reservations from before sharing are home's). The zero value is a
// cluster's own store.
type sharing struct {
	cluster, home string
	what          string // "hostname", "IP": for errors
	gr            schema.GroupResource
}

func (s sharing) shared() bool { return s.cluster != "" }

// Shared is the view of h's store that cluster reserves through, the
// store being shared by several clusters; home is the cluster that owns
// the store (its reservations from before sharing are home's).
func (h *Hostnames) Shared(cluster, home string) *Hostnames {
	v := *h
	v.sharing = sharing{cluster: cluster, home: home, what: "hostname", gr: crds.HostnameReservations.GroupResource()}
	return &v
}

// IsShared reports whether h is a cluster's view of a shared store.
func (h *Hostnames) IsShared() bool { return h.shared() }

// SharedWith is the view of h's shared store for another cluster.
func (h *Hostnames) SharedWith(cluster string) *Hostnames { return h.Shared(cluster, h.home) }

// Shared is the view of p's store (and pool) that cluster allocates
// through, as Hostnames.Shared: a lease's endpoint has one address in
// every cluster, and an address is one lease's across all of them.
func (p *IPs) Shared(cluster, home string) *IPs {
	v := *p
	v.sharing = sharing{cluster: cluster, home: home, what: "IP", gr: crds.IPReservations.GroupResource()}
	return &v
}

// IsShared reports whether p is a cluster's view of a shared store.
func (p *IPs) IsShared() bool { return p.shared() }

// SharedWith is the view of p's shared store for another cluster.
func (p *IPs) SharedWith(cluster string) *IPs { return p.Shared(cluster, p.home) }

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

// usedBy reports whether s's cluster uses u (a reservation from before
// sharing is home's).
func (s sharing) usedBy(u *unstructured.Unstructured) bool {
	if _, ok := u.GetLabels()[UsedByLabel(s.cluster)]; ok {
		return true
	}
	return s.cluster == s.home && len(users(u)) == 0
}

// use records that s's cluster uses the reservation name of res the lease
// holds (created by another cluster, or before sharing). It writes the
// labels only, with the object's resourceVersion as a precondition, so it
// never takes over a reservation released and re-created meanwhile.
func (s sharing) use(ctx context.Context, res dynamic.ResourceInterface, name, leaseID string) (added bool, err error) {
	for attempt := 0; ; attempt++ {
		u, err := getIfExists(ctx, res, name)
		if err != nil {
			return false, fmt.Errorf("reserve %s %s: %w", s.what, name, err)
		}
		if u == nil || specString(u, "lease") != leaseID {
			// Released meanwhile: the caller's reserve sees it on a retry.
			return false, fmt.Errorf("reserve %s %s: %w", s.what, name, apierrors.NewConflict(
				s.gr, name, errors.New("released while this cluster reserved it, try again")))
		}
		if _, ok := u.GetLabels()[UsedByLabel(s.cluster)]; ok {
			return false, nil
		}
		add := map[string]any{UsedByLabel(s.cluster): "true"}
		if len(users(u)) == 0 && s.home != s.cluster {
			add[UsedByLabel(s.home)] = "true" // made before sharing: home's
		}
		err = s.patchLabels(ctx, res, u, add)
		if err == nil || !apierrors.IsConflict(err) || attempt >= 5 {
			return err == nil, err
		}
	}
}

// unuse releases s's cluster's use of u, which the lease holds: the
// reservation goes once no cluster uses it. Preconditions as in use and
// deleteHeld: a reservation changed meanwhile is read again.
func (s sharing) unuse(ctx context.Context, res dynamic.ResourceInterface, u *unstructured.Unstructured, leaseID string) error {
	for attempt := 0; ; attempt++ {
		if u == nil || specString(u, "lease") != leaseID || !s.usedBy(u) {
			return nil
		}
		others := 0
		for _, c := range users(u) {
			if c != s.cluster {
				others++
			}
		}
		var err error
		if others == 0 {
			// Once: a conflict (another cluster began to use it) reads it again.
			uid, rv := u.GetUID(), u.GetResourceVersion()
			err = res.Delete(ctx, u.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
			if apierrors.IsNotFound(err) {
				err = nil
			}
		} else {
			err = s.patchLabels(ctx, res, u, map[string]any{UsedByLabel(s.cluster): nil})
		}
		if err == nil || !apierrors.IsConflict(err) || attempt >= 5 {
			return err
		}
		name := u.GetName()
		if u, err = getIfExists(ctx, res, name); err != nil {
			return fmt.Errorf("release %s: %w", name, err)
		}
	}
}

// rollback deletes the reservations of res a failed call created (in a
// shared store: takes back the uses it added, as another cluster of the
// lease may use them by now). It runs even when ctx is done, for a short
// while.
func (s sharing) rollback(ctx context.Context, res dynamic.ResourceInterface, created []unstructured.Unstructured, leaseID string) error {
	if len(created) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if !s.shared() {
		return deleteAllHeld(rctx, res, created, leaseID)
	}
	var errs []error
	for i := range created {
		u, err := getIfExists(rctx, res, created[i].GetName())
		if err == nil {
			err = s.unuse(rctx, res, u, leaseID)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// releaseAll releases every reservation of res the lease holds: in a
// shared store, s's cluster's use of each (one goes once no cluster uses
// it); in a cluster's own, the reservations.
func (s sharing) releaseAll(ctx context.Context, res dynamic.ResourceInterface, leaseID, what string) error {
	if !s.shared() {
		return releaseAll(ctx, res, leaseID, what)
	}
	if err := lease.ValidateID(leaseID); err != nil {
		return err
	}
	items, err := listHeld(ctx, res, leaseID)
	if err != nil {
		return fmt.Errorf("list %s of lease %s: %w", what, leaseID, err)
	}
	var errs []error
	for i := range items {
		errs = append(errs, s.unuse(ctx, res, &items[i], leaseID))
	}
	return errors.Join(errs...)
}

// patchLabels merges labels into u's (a nil value removes one), if u is
// unchanged since it was read.
func (s sharing) patchLabels(ctx context.Context, res dynamic.ResourceInterface, u *unstructured.Unstructured, labels map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": labels, "resourceVersion": u.GetResourceVersion(),
	}})
	if err != nil {
		return err
	}
	_, err = res.Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: crds.FieldManager})
	if err != nil {
		return fmt.Errorf("%s %s: record the clusters using it: %w", s.what, u.GetName(), err)
	}
	return nil
}
