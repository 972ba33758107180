package reserve

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"sort"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/k8s/crds"
)

// PoolExhaustedError is returned by Ensure when the pool has no free address
// left for an endpoint.
type PoolExhaustedError struct {
	Pool     netip.Prefix
	Lease    string
	Endpoint string
}

func (e *PoolExhaustedError) Error() string {
	return fmt.Sprintf("IP pool %s is exhausted: no free address for endpoint %s of lease %s", e.Pool, e.Endpoint, e.Lease)
}

// IPs allocates declared IP addresses (Akash "IP endpoints") to endpoints of
// leases from a pool, one IPReservation per address, named after it.
type IPs struct {
	res     dynamic.NamespaceableResourceInterface
	pool    Pool
	sharing // a view of a store shared by several clusters (shared.go); zero for a cluster's own store
}

// NewIPs returns the declared IPs of the cluster, allocated from pool.
func NewIPs(dyn dynamic.Interface, pool netip.Prefix) *IPs {
	return &IPs{res: dyn.Resource(crds.IPReservations), pool: Pool{CIDR: pool.Masked()}}
}

// Pool is the pool addresses are allocated from.
func (p *IPs) Pool() Pool { return p.pool }

// ValidateEndpoint checks that an endpoint name can be stored in a label
// value: 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a
// letter or digit.
func ValidateEndpoint(endpoint string) error {
	if endpoint == "" {
		return errors.New(`invalid endpoint name "": it must not be empty`)
	}
	if errs := validation.IsValidLabelValue(endpoint); len(errs) > 0 {
		return fmt.Errorf("invalid endpoint name %q: %s", endpoint, errs[0])
	}
	return nil
}

// ipHold is one reservation of a lease.
type ipHold struct {
	addr netip.Addr
	obj  unstructured.Unstructured
}

// heldByEndpoint returns the lease's reservations by endpoint, the one that
// counts first: the one created first. (An endpoint holds more than one
// address only after concurrent Ensure calls for the same lease; Ensure then
// releases the others.) "First" is by creation revision: reservations are
// never updated, so their resourceVersion is the etcd revision that created
// them, which orders any two creations. Creation timestamps have one-second
// resolution: two attempts in the same second used to be ordered by address,
// so an attempt that had already returned its address could see it released
// by a concurrent one (TestIPsConcurrentEnsureOfOneLeaseConverges).
func (p *IPs) heldByEndpoint(ctx context.Context, leaseID string) (map[string][]ipHold, error) {
	items, err := listHeld(ctx, p.res, leaseID)
	if err != nil {
		return nil, fmt.Errorf("list IPs of lease %s: %w", leaseID, err)
	}
	out := map[string][]ipHold{}
	for _, u := range items {
		a, err := netip.ParseAddr(specString(&u, "ip"))
		if err != nil {
			continue // not written by us; the schema does not allow it
		}
		ep := specString(&u, "endpoint")
		out[ep] = append(out[ep], ipHold{addr: a, obj: u})
	}
	for _, hs := range out {
		sort.Slice(hs, func(i, j int) bool {
			ri, errI := strconv.ParseUint(hs[i].obj.GetResourceVersion(), 10, 64)
			rj, errJ := strconv.ParseUint(hs[j].obj.GetResourceVersion(), 10, 64)
			if errI == nil && errJ == nil && ri != rj {
				return ri < rj
			}
			ti, tj := hs[i].obj.GetCreationTimestamp(), hs[j].obj.GetCreationTimestamp()
			if !ti.Equal(&tj) {
				return ti.Before(&tj)
			}
			return hs[i].addr.Less(hs[j].addr)
		})
	}
	return out, nil
}

// Declared returns the addresses the lease holds, endpoint -> IP (Akash's
// GetDeclaredIPs).
func (p *IPs) Declared(ctx context.Context, leaseID string) (map[string]string, error) {
	if err := lease.ValidateID(leaseID); err != nil {
		return nil, err
	}
	byEP, err := p.heldByEndpoint(ctx, leaseID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(byEP))
	for ep, hs := range byEP {
		if !p.shared() || p.usedBy(&hs[0].obj) { // in a shared store: the ones this cluster uses
			out[ep] = hs[0].addr.String()
		}
	}
	return out, nil
}

// Ensure makes each endpoint hold an address and returns endpoint -> IP for
// the requested endpoints. An endpoint that holds an address keeps it (even
// one outside the current pool); a new endpoint gets the lowest free address
// of the pool, claimed by creating its IPReservation (when another lease
// creates it first, the next address is tried). Ensure is idempotent and
// safe to retry. When the pool runs out it fails with *PoolExhaustedError
// and releases what the call allocated (all-or-nothing). In a shared store
// an endpoint that holds an address for another cluster of the lease gets
// the same address here.
func (p *IPs) Ensure(ctx context.Context, leaseID, owner string, endpoints []string) (map[string]string, error) {
	if err := validateHolder(leaseID, owner); err != nil {
		return nil, err
	}
	eps, err := dedupeEndpoints(endpoints)
	if err != nil {
		return nil, err
	}
	byEP, err := p.heldByEndpoint(ctx, leaseID)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, ep := range eps {
		if len(byEP[ep]) == 0 {
			missing = append(missing, ep)
		}
	}
	if len(missing) > 0 {
		if err := p.pool.Validate(); err != nil {
			return nil, err
		}
		if err := p.allocate(ctx, leaseID, owner, missing); err != nil {
			return nil, err
		}
		// Read back: a concurrent Ensure of the same lease may have
		// allocated too; both settle on the same address.
		if byEP, err = p.heldByEndpoint(ctx, leaseID); err != nil {
			return nil, err
		}
	}
	out := make(map[string]string, len(eps))
	var errs []error
	var added []unstructured.Unstructured // uses this call added: taken back if it fails
	for _, ep := range eps {
		hs := byEP[ep]
		if len(hs) == 0 {
			return nil, errors.Join(fmt.Errorf("ensure IP of endpoint %s of lease %s: %w", ep, leaseID,
				apierrors.NewConflict(crds.IPReservations.GroupResource(), ep, errors.New("released while being allocated, try again"))),
				p.rollback(ctx, added, leaseID))
		}
		if p.shared() && !p.usedBy(&hs[0].obj) {
			// Held for another cluster of the lease (or before sharing): this one too.
			ok, err := p.use(ctx, p.res, hs[0].obj.GetName(), leaseID)
			if err != nil {
				return nil, errors.Join(err, p.rollback(ctx, added, leaseID))
			}
			if ok {
				added = append(added, hs[0].obj)
			}
		}
		out[ep] = hs[0].addr.String()
		for i := 1; i < len(hs); i++ {
			if err := deleteHeld(ctx, p.res, &hs[i].obj, leaseID); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func dedupeEndpoints(endpoints []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, ep := range endpoints {
		if err := ValidateEndpoint(ep); err != nil {
			return nil, err
		}
		if !seen[ep] {
			seen[ep] = true
			out = append(out, ep)
		}
	}
	sort.Strings(out)
	return out, nil
}

// allocate claims an address for each endpoint, lowest free first; on
// failure it deletes what it created.
func (p *IPs) allocate(ctx context.Context, leaseID, owner string, endpoints []string) error {
	taken, err := p.taken(ctx)
	if err != nil {
		return err
	}
	next, stop := iter.Pull(p.pool.Addrs())
	defer stop()
	var created []unstructured.Unstructured
	for _, ep := range endpoints {
		u, err := p.claim(ctx, next, taken, leaseID, owner, ep)
		if err != nil {
			return errors.Join(err, p.rollback(ctx, created, leaseID))
		}
		if u != nil {
			created = append(created, *u)
		}
	}
	return nil
}

// taken is every reserved address, of any lease.
func (p *IPs) taken(ctx context.Context) (map[netip.Addr]bool, error) {
	items, err := listAll(ctx, p.res, "")
	if err != nil {
		return nil, fmt.Errorf("list IP reservations: %w", err)
	}
	out := make(map[netip.Addr]bool, len(items))
	for _, u := range items {
		if a, err := netip.ParseAddr(specString(&u, "ip")); err == nil {
			out[a] = true
		}
	}
	return out, nil
}

// claim takes the next free address for the endpoint. It returns the object
// when it created one, nil when a concurrent Ensure of the same lease had
// just claimed that address for the same endpoint.
func (p *IPs) claim(ctx context.Context, next func() (netip.Addr, bool), taken map[netip.Addr]bool, leaseID, owner, endpoint string) (*unstructured.Unstructured, error) {
	for {
		a, ok := next()
		if !ok {
			return nil, &PoolExhaustedError{Pool: p.pool.CIDR, Lease: leaseID, Endpoint: endpoint}
		}
		if taken[a] {
			continue
		}
		taken[a] = true
		labels := map[string]any{crds.LabelLease: leaseID, crds.LabelOwner: owner, crds.LabelEndpoint: endpoint}
		if p.shared() {
			labels[UsedByLabel(p.cluster)] = "true"
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crds.APIVersion,
			"kind":       crds.KindIPReservation,
			"metadata": map[string]any{
				"name":   objectName(a),
				"labels": labels,
			},
			"spec": map[string]any{"ip": a.String(), "lease": leaseID, "owner": owner, "endpoint": endpoint},
		}}
		for attempt := 0; attempt < 3; attempt++ {
			u, err := p.res.Create(ctx, obj, metav1.CreateOptions{FieldManager: crds.FieldManager})
			if err == nil {
				return u, nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("reserve IP %s for endpoint %s of lease %s: %w", a, endpoint, leaseID, err)
			}
			existing, err := getIfExists(ctx, p.res, objectName(a))
			if err != nil {
				return nil, fmt.Errorf("reserve IP %s for endpoint %s of lease %s: %w", a, endpoint, leaseID, err)
			}
			if existing == nil {
				continue // released in between: try the same address again
			}
			if specString(existing, "lease") == leaseID && specString(existing, "owner") == owner && specString(existing, "endpoint") == endpoint {
				return nil, nil
			}
			break // another lease's: try the next address
		}
	}
}

// rollback undoes what a failed Ensure created (sharing.rollback).
func (p *IPs) rollback(ctx context.Context, created []unstructured.Unstructured, leaseID string) error {
	return p.sharing.rollback(ctx, p.res, created, leaseID)
}

// Release releases the addresses of the given endpoints of the lease (those
// it no longer declares, once the new version is healthy; in a shared
// store, this cluster's use of them). Endpoints without an address are
// skipped, so Release is safe to retry.
func (p *IPs) Release(ctx context.Context, leaseID string, endpoints []string) error {
	if err := lease.ValidateID(leaseID); err != nil {
		return err
	}
	byEP, err := p.heldByEndpoint(ctx, leaseID)
	if err != nil {
		return err
	}
	var errs []error
	for _, ep := range endpoints {
		for i := range byEP[ep] {
			if p.shared() {
				errs = append(errs, p.unuse(ctx, p.res, &byEP[ep][i].obj, leaseID))
				continue
			}
			if err := deleteHeld(ctx, p.res, &byEP[ep][i].obj, leaseID); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ReleaseAll releases every address the lease holds (in a shared store,
// this cluster's use of each: an address goes once no cluster uses it).
func (p *IPs) ReleaseAll(ctx context.Context, leaseID string) error {
	return p.releaseAll(ctx, p.res, leaseID, "IPs")
}
