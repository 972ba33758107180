package observe

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// Members shares the leases' observations among the live workers of a
// group (the workers of one Temporal namespace and task queue): each
// worker renews a coordination.k8s.io Lease of its own (the object
// client-go's leader election uses; not a tenant's lease), watches the
// group's, and owns the tenant leases that rendezvous hashing gives it
// among the live members. Only a lease's owner sends its observations, so
// requests to Temporal do not grow with the number of workers.
//
// A member is live while its renewals are seen, judged by this worker's
// clock (a record first seen already older than the TTL is not). Failures
// err towards more senders, never none: this worker always counts itself,
// so when the API server cannot be reached every worker ends up owning
// every lease (a duplicate observation is rejected by the workflow at no
// cost to its history), and a worker that died stops owning anything at
// most TTL after its last renewal.
type Members struct {
	kc        kubernetes.Interface
	namespace string
	group     string
	identity  string
	name      string // this worker's record
	label     string // the group's label value
	ttl       time.Duration
	log       *slog.Logger
	now       func() time.Time

	informer cache.SharedIndexInformer
	// handled: the records listed have reached seen (the informer's own
	// HasSynced is true before its handlers have them).
	handled cache.ResourceEventHandlerRegistration
	mu      sync.Mutex
	seen    map[string]seenMember // by record name
	own     *coordinationv1.Lease // as last written
}

type seenMember struct {
	identity string
	renew    time.Time // the record's renewTime
	at       time.Time // when this worker saw that renewal (its own clock)
}

// MembersOptions configure Members.
type MembersOptions struct {
	// Namespace holds the members' records (the worker's namespace).
	Namespace string
	// Group is what the members share (e.g. "<temporal namespace>/<task
	// queue>"); workers of other groups observe on their own.
	Group string
	// Identity names this worker in its group (unique: a pod's name).
	Identity string
	// TTL: a member not seen renewing for this long is gone (default 15s;
	// records are renewed every TTL/3).
	TTL time.Duration
	Log *slog.Logger
}

const (
	groupLabel      = "observer.deployflow.dev/group"
	groupAnnotation = "observer.deployflow.dev/group-name"
)

// NewMembers builds the membership of opts.Group; Run joins it.
func NewMembers(kc kubernetes.Interface, opts MembersOptions) *Members {
	if opts.TTL <= 0 {
		opts.TTL = 15 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	g := shortHash(opts.Group)
	m := &Members{
		kc: kc, namespace: opts.Namespace, group: opts.Group, identity: opts.Identity,
		name: "deployflow-observer-" + g[:10] + "-" + shortHash(opts.Identity)[:10], label: g[:10],
		ttl: opts.TTL, log: opts.Log.With("component", "observer-members", "group", opts.Group, "identity", opts.Identity),
		now: time.Now, seen: map[string]seenMember{},
	}
	// Every group's records in the namespace: liveness is judged in this
	// group only, but any member prunes the records of dead workers.
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(opts.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = groupLabel }))
	m.informer = f.Coordination().V1().Leases().Informer()
	m.handled, _ = m.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.update(obj) },
		UpdateFunc: func(_, obj any) { m.update(obj) },
		DeleteFunc: func(obj any) { m.remove(obj) },
	})
	return m
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (m *Members) update(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Spec.HolderIdentity == nil || l.Labels[groupLabel] != m.label {
		return
	}
	var renew time.Time
	if l.Spec.RenewTime != nil {
		renew = l.Spec.RenewTime.Time
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, known := m.seen[l.Name]
	switch {
	case known && prev.renew.Equal(renew):
		return // nothing renewed
	case known:
		m.seen[l.Name] = seenMember{identity: *l.Spec.HolderIdentity, renew: renew, at: now}
	default:
		// First sight: as old as its renewal says (a dead worker's record
		// is not live), never newer than now.
		at := renew
		if at.After(now) {
			at = now
		}
		m.seen[l.Name] = seenMember{identity: *l.Spec.HolderIdentity, renew: renew, at: at}
	}
}

func (m *Members) remove(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if l, ok := obj.(*coordinationv1.Lease); ok {
		m.mu.Lock()
		delete(m.seen, l.Name)
		m.mu.Unlock()
	}
}

// Live is the identities of the group's live members, sorted; this
// worker's is always among them.
func (m *Members) Live() []string {
	now := m.now()
	set := map[string]bool{m.identity: true}
	m.mu.Lock()
	for _, s := range m.seen {
		if now.Sub(s.at) < m.ttl {
			set[s.identity] = true
		}
	}
	m.mu.Unlock()
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Owns reports whether this worker observes lease id among live.
func (m *Members) Owns(live []string, id string) bool { return Owner(live, id) == m.identity }

// Owner is the member of live that observes lease id: the highest
// hash of (member, lease) (rendezvous hashing: when a member leaves, only
// its leases move, evenly over the others).
func Owner(live []string, id string) string {
	var best string
	var bestScore uint64
	for _, member := range live {
		sum := sha256.Sum256([]byte(member + "\x00" + id))
		if s := binary.BigEndian.Uint64(sum[:8]); best == "" || s > bestScore || (s == bestScore && member < best) {
			best, bestScore = member, s
		}
	}
	return best
}

// HasSynced reports whether the group's records have been listed and
// counted: Live is the group's, not this worker alone.
func (m *Members) HasSynced() bool { return m.handled != nil && m.handled.HasSynced() }

// Run joins the group until ctx ends, then leaves it (its record deleted,
// so the others take its leases at once).
func (m *Members) Run(ctx context.Context) {
	go m.informer.RunWithContext(ctx)
	tick := time.NewTicker(m.ttl / 3)
	defer tick.Stop()
	for {
		m.renew(ctx)
		select {
		case <-ctx.Done():
			m.leave()
			return
		case <-tick.C:
		}
	}
}

// renew writes this worker's record with renewTime now, creating it if
// needed; a failure is logged and tried again at the next tick (the
// others then count this worker gone: more senders, never fewer).
func (m *Members) renew(ctx context.Context) {
	leases := m.kc.CoordinationV1().Leases(m.namespace)
	now := metav1.NewMicroTime(m.now())
	m.mu.Lock()
	own := m.own
	m.mu.Unlock()
	var err error
	if own == nil {
		own, err = leases.Get(ctx, m.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			own, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: m.namespace,
					Labels:      map[string]string{groupLabel: m.label, "app.kubernetes.io/managed-by": "deployflow"},
					Annotations: map[string]string{groupAnnotation: m.group}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(m.identity), AcquireTime: &now, RenewTime: &now,
					LeaseDurationSeconds: ptr.To(int32((m.ttl + time.Second - 1) / time.Second))},
			}, metav1.CreateOptions{})
		}
	} else {
		own = own.DeepCopy()
		own.Spec.RenewTime = &now
		own.Spec.HolderIdentity = ptr.To(m.identity)
		own, err = leases.Update(ctx, own, metav1.UpdateOptions{})
	}
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("cannot renew this worker's membership: the other workers will take its leases (and it keeps observing them too)", "lease", m.namespace+"/"+m.name, "error", err)
		}
		own = nil // read afresh next time (a conflict, a deleted record)
	}
	m.mu.Lock()
	m.own = own
	m.mu.Unlock()
	m.prune(ctx)
}

// prune deletes the records of any group not renewed for 10 times their
// own TTL (workers that died without leaving), so the lists stay small.
func (m *Members) prune(ctx context.Context) {
	now := m.now()
	for _, obj := range m.informer.GetStore().List() {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok || l.Name == m.name || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil ||
			now.Sub(l.Spec.RenewTime.Time) < 10*time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
			continue
		}
		rv := l.ResourceVersion
		err := m.kc.CoordinationV1().Leases(m.namespace).Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			m.log.Debug("prune a gone member's record", "lease", l.Name, "error", err)
		}
	}
}

// leave deletes this worker's record.
func (m *Members) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.kc.CoordinationV1().Leases(m.namespace).Delete(ctx, m.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		m.log.Warn("leave the group: the others take this worker's leases once its record expires", "error", err)
	}
}
