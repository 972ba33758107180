package reserve

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/k8s/crds"
)

// HostnameResult is what a lease holds of the hostnames it asked for.
type HostnameResult struct {
	// Reserved are the hostnames held by the lease, sorted.
	Reserved []string
	// Withheld are hostnames held by another lease of the same owner: they
	// are not taken over (the owner moves a hostname by releasing it from
	// the other lease first). Sorted by hostname.
	Withheld []Withheld
}

// Withheld is a hostname held by another lease of the same owner.
type Withheld struct {
	Hostname string
	Lease    string
}

// ConflictError is a hostname held by a lease of another owner.
type ConflictError struct {
	Hostname    string
	HolderLease string
	HolderOwner string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("hostname %s is held by lease %s of owner %s", e.Hostname, e.HolderLease, e.HolderOwner)
}

// BlockedError is a hostname on the provider's blocked list.
type BlockedError struct {
	Hostname string
	Rule     string // the entry of the blocked list it matches
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("hostname %s is blocked on this provider (rule %q)", e.Hostname, e.Rule)
}

// ErrInvalidHostname is wrapped by the error for a hostname that is not a
// valid DNS name.
var ErrInvalidHostname = errors.New("invalid hostname")

// NormalizeHostname lowercases hostname and drops a trailing dot; it fails
// (wrapping ErrInvalidHostname) unless the result is a DNS name of
// lowercase letters, digits, '-' and '.', labels of at most 63 characters,
// at most 253 in all. Wildcards are not hostnames.
func NormalizeHostname(hostname string) (string, error) {
	h := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(hostname)), ".")
	if h == "" {
		return "", fmt.Errorf("%w %q: empty", ErrInvalidHostname, hostname)
	}
	if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 {
		return "", fmt.Errorf("%w %q: %s", ErrInvalidHostname, hostname, errs[0])
	}
	for _, label := range strings.Split(h, ".") {
		if len(label) > validation.DNS1123LabelMaxLength {
			return "", fmt.Errorf("%w %q: label %q is longer than %d characters", ErrInvalidHostname, hostname, label, validation.DNS1123LabelMaxLength)
		}
	}
	return h, nil
}

// normalizeBlocked cleans the blocked list: lowercase, no trailing dot, no
// empty entries. An entry starting with "." blocks every name under it
// (but not the name itself); any other entry blocks exactly that name.
func normalizeBlocked(blocked []string) []string {
	var out []string
	for _, b := range blocked {
		b = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(b)), ".")
		if b == "" || b == "." {
			continue
		}
		out = append(out, b)
	}
	return out
}

// matchBlocked returns the first entry of the (normalized) blocked list that
// hostname (normalized) matches: equal to an exact entry, or ending with a
// ".suffix" entry.
func matchBlocked(blocked []string, hostname string) (string, bool) {
	for _, b := range blocked {
		if strings.HasPrefix(b, ".") {
			if strings.HasSuffix(hostname, b) {
				return b, true
			}
		} else if hostname == b {
			return b, true
		}
	}
	return "", false
}

// Hostnames reserves hostnames for leases with HostnameReservation objects
// named after the hostname.
type Hostnames struct {
	res     dynamic.NamespaceableResourceInterface
	blocked []string
	sharing // a view of a store shared by several clusters (shared.go); zero for a cluster's own store
}

// NewHostnames returns the hostname reservations of the cluster. blocked is
// the provider's blocked list: exact names, and ".suffix" entries blocking
// every name under suffix.
func NewHostnames(dyn dynamic.Interface, blocked []string) *Hostnames {
	return &Hostnames{res: dyn.Resource(crds.HostnameReservations), blocked: normalizeBlocked(blocked)}
}

// Blocked reports whether hostname is blocked and by which rule.
func (h *Hostnames) Blocked(hostname string) (rule string, blocked bool) {
	n, err := NormalizeHostname(hostname)
	if err != nil {
		return "", false
	}
	return matchBlocked(h.blocked, n)
}

type holding int

const (
	free     holding = iota // nobody holds it
	held                    // this lease holds it
	withheld                // another lease of the same owner holds it
)

type hostPlan struct {
	hostname    string
	holding     holding
	holderLease string
}

// prepare validates the lease and owner and normalizes, dedupes and sorts
// the hostnames.
func prepare(leaseID, owner string, hostnames []string) ([]string, error) {
	if err := validateHolder(leaseID, owner); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, raw := range hostnames {
		n, err := NormalizeHostname(raw)
		if err != nil {
			return nil, err
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// classify says who holds reservation u relative to leaseID/owner; a holder
// of another owner is a *ConflictError.
func classify(u *unstructured.Unstructured, leaseID, owner string) (holding, string, error) {
	hl, ho := specString(u, "lease"), specString(u, "owner")
	switch {
	case hl == leaseID && ho == owner:
		return held, hl, nil
	case ho == owner && hl != leaseID:
		return withheld, hl, nil
	default: // another owner (even under the same lease id): never taken
		return free, "", &ConflictError{Hostname: u.GetName(), HolderLease: hl, HolderOwner: ho}
	}
}

// inspect looks at each (sorted) hostname in turn and stops at the first
// blocked or conflicting one.
func (h *Hostnames) inspect(ctx context.Context, leaseID, owner string, names []string) ([]hostPlan, error) {
	plans := make([]hostPlan, 0, len(names))
	for _, n := range names {
		if rule, ok := matchBlocked(h.blocked, n); ok {
			return nil, &BlockedError{Hostname: n, Rule: rule}
		}
		u, err := getIfExists(ctx, h.res, n)
		if err != nil {
			return nil, fmt.Errorf("check hostname %s: %w", n, err)
		}
		p := hostPlan{hostname: n}
		if u != nil {
			if p.holding, p.holderLease, err = classify(u, leaseID, owner); err != nil {
				return nil, err
			}
		}
		plans = append(plans, p)
	}
	return plans, nil
}

func resultOf(plans []hostPlan) HostnameResult {
	var r HostnameResult
	for _, p := range plans {
		switch p.holding {
		case free, held:
			r.Reserved = append(r.Reserved, p.hostname)
		case withheld:
			r.Withheld = append(r.Withheld, Withheld{Hostname: p.hostname, Lease: p.holderLease})
		}
	}
	return r
}

// Check reports, without changing anything, what Reserve would do for the
// lease's desired hostnames: the first (by hostname) blocked one as a
// *BlockedError or one held by another owner as a *ConflictError, else the
// result Reserve would return if nothing changes meanwhile.
func (h *Hostnames) Check(ctx context.Context, leaseID, owner string, hostnames []string) (HostnameResult, error) {
	names, err := prepare(leaseID, owner, hostnames)
	if err != nil {
		return HostnameResult{}, err
	}
	plans, err := h.inspect(ctx, leaseID, owner, names)
	if err != nil {
		return HostnameResult{}, err
	}
	return resultOf(plans), nil
}

// Reserve reserves the hostnames for the lease. Hostnames it holds already
// stay held; free ones are claimed by creating their reservation; ones held
// by another lease of the same owner are Withheld (not taken over).
//
// A blocked hostname or one held by another owner fails the whole call
// (*BlockedError, *ConflictError) before anything is created; if another
// owner wins a race for a hostname during the call, the reservations this
// call created are deleted again, and those the lease held before are kept.
// So the call is all-or-nothing, safe to retry, and never steals.
func (h *Hostnames) Reserve(ctx context.Context, leaseID, owner string, hostnames []string) (HostnameResult, error) {
	names, err := prepare(leaseID, owner, hostnames)
	if err != nil {
		return HostnameResult{}, err
	}
	plans, err := h.inspect(ctx, leaseID, owner, names)
	if err != nil {
		return HostnameResult{}, err
	}
	var created []unstructured.Unstructured // by this call: undone if it fails
	for i := range plans {
		if plans[i].holding == held && h.shared() {
			// Held for another cluster (or before sharing): this one too.
			added, err := h.use(ctx, h.res, plans[i].hostname, leaseID)
			if err != nil {
				return HostnameResult{}, errors.Join(err, h.rollback(ctx, created, leaseID))
			}
			if added {
				created = append(created, unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": plans[i].hostname}}})
			}
			continue
		}
		if plans[i].holding != free {
			continue
		}
		u, holding, holder, err := h.claim(ctx, plans[i].hostname, leaseID, owner)
		if err != nil {
			return HostnameResult{}, errors.Join(err, h.rollback(ctx, created, leaseID))
		}
		plans[i].holding, plans[i].holderLease = holding, holder
		if u != nil {
			created = append(created, *u)
		}
	}
	return resultOf(plans), nil
}

// claim creates the reservation of hostname for the lease. It returns the
// object when this call created it; when the reservation exists already it
// says who holds it (a *ConflictError for another owner).
func (h *Hostnames) claim(ctx context.Context, hostname, leaseID, owner string) (*unstructured.Unstructured, holding, string, error) {
	labels := map[string]any{crds.LabelLease: leaseID, crds.LabelOwner: owner}
	if h.shared() {
		labels[UsedByLabel(h.cluster)] = "true"
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crds.APIVersion,
		"kind":       crds.KindHostnameReservation,
		"metadata": map[string]any{
			"name":   hostname,
			"labels": labels,
		},
		"spec": map[string]any{"hostname": hostname, "lease": leaseID, "owner": owner},
	}}
	for attempt := 0; ; attempt++ {
		u, err := h.res.Create(ctx, obj, metav1.CreateOptions{FieldManager: crds.FieldManager})
		if err == nil {
			return u, held, leaseID, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, free, "", fmt.Errorf("reserve hostname %s: %w", hostname, err)
		}
		existing, err := getIfExists(ctx, h.res, hostname)
		if err != nil {
			return nil, free, "", fmt.Errorf("reserve hostname %s: %w", hostname, err)
		}
		if existing == nil { // released in between: try again
			if attempt < 3 {
				continue
			}
			return nil, free, "", fmt.Errorf("reserve hostname %s: %w", hostname,
				apierrors.NewConflict(crds.HostnameReservations.GroupResource(), hostname, errors.New("reservation keeps changing, try again")))
		}
		holding, holder, err := classify(existing, leaseID, owner)
		var added bool
		if err == nil && holding == held && h.shared() {
			// Another cluster of the lease created it in between.
			added, err = h.use(ctx, h.res, hostname, leaseID)
		}
		if added {
			return existing, holding, holder, nil // this call's use: undone if it fails
		}
		return nil, holding, holder, err
	}
}

// rollback undoes what a failed Reserve created (sharing.rollback).
func (h *Hostnames) rollback(ctx context.Context, created []unstructured.Unstructured, leaseID string) error {
	return h.sharing.rollback(ctx, h.res, created, leaseID)
}

// Held returns the hostnames the lease holds, sorted.
func (h *Hostnames) Held(ctx context.Context, leaseID string) ([]string, error) {
	if err := lease.ValidateID(leaseID); err != nil {
		return nil, err
	}
	items, err := listHeld(ctx, h.res, leaseID)
	if err != nil {
		return nil, fmt.Errorf("list hostnames of lease %s: %w", leaseID, err)
	}
	out := make([]string, 0, len(items))
	for _, u := range items {
		if !h.shared() || h.usedBy(&u) {
			out = append(out, u.GetName())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Release releases the given hostnames if the lease holds them; hostnames
// it does not hold (free, held by another lease, not valid names) are left
// alone, so Release is safe to retry.
func (h *Hostnames) Release(ctx context.Context, leaseID string, hostnames []string) error {
	if err := lease.ValidateID(leaseID); err != nil {
		return err
	}
	var errs []error
	for _, raw := range hostnames {
		n, err := NormalizeHostname(raw)
		if err != nil {
			continue // never reserved
		}
		if h.shared() {
			u, err := getIfExists(ctx, h.res, n)
			if err == nil {
				err = h.unuse(ctx, h.res, u, leaseID)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("release %s: %w", n, err))
			}
			continue
		}
		if err := deleteHeldByName(ctx, h.res, n, leaseID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ReleaseAll releases every hostname the lease holds (in a shared store,
// this cluster's use of each: a hostname goes once no cluster uses it).
func (h *Hostnames) ReleaseAll(ctx context.Context, leaseID string) error {
	return h.releaseAll(ctx, h.res, leaseID, "hostnames")
}
