// Package observe is the worker's event-driven view of the leases: one set
// of shared informers per worker (lease records, and the ReplicaSets
// deployflow manages) instead of a poll per lease. When something a lease's
// workflow decides on changes — the lease closed, a service fell below or
// came back to its desired replicas (a hand-made scale or delete included),
// or the cluster could not be observed for longer than a threshold — it
// sends the lease's workflow an Observation (the "observe" update). The
// workflow's validator rejects an observation that changes nothing, and a
// rejected update leaves no trace in the workflow's history. With Members,
// the live workers of a group split the leases and only a lease's owner
// sends its observations (members.go): one send per change, whatever the
// number of workers.
//
// The same ReplicaSet cache serves the rollouts' waits
// (activities.ReplicaSetCache) and the leases' safety-net ticks
// (activities.LeaseObserver), so neither makes requests of its own.
package observe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/google/uuid"

	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
)

// Errors a Sender returns for an observation the workflow did not take.
var (
	// ErrNoWorkflow: the lease has no running workflow; nothing to tell.
	ErrNoWorkflow = errors.New("the lease has no running workflow")
	// ErrKnown: the workflow knows it already (another worker told it).
	ErrKnown = errors.New("the workflow knows this already")
	// ErrDeferred: the workflow is deploying; send it again a little later.
	ErrDeferred = errors.New("the workflow is deploying")
	// ErrRejected: the workflow answered with another refusal (a run
	// without the update, an observation of another lease): not sent
	// again until the lease changes.
	ErrRejected = errors.New("the workflow refused the observation")
)

// deferredRetry is how soon an observation deferred by a deploy in
// progress is sent again when the Sender cannot say when the deploy ends
// (it is not a RunWaiter, or the deferral names no run).
const deferredRetry = 2 * time.Second

// deferredFallback is how soon an observation deferred by a run the
// observer waits on is sent again if the wait has not ended first: the
// wait is the signal, this only bounds a wait that never answers.
const deferredFallback = time.Minute

// DeferredError is ErrDeferred saying when to send again: when Run, the
// workflow run deploying, closes (a lease workflow deploys in one run and
// continues as new when the deploy ends), or after RetryAfter (the
// workflow is only between two waits).
type DeferredError struct {
	Run        string
	RetryAfter time.Duration
}

func (e *DeferredError) Error() string {
	if e.Run == "" {
		return ErrDeferred.Error()
	}
	return ErrDeferred.Error() + " (run " + e.Run + ")"
}

// Is makes a DeferredError an ErrDeferred.
func (e *DeferredError) Is(target error) bool { return target == ErrDeferred }

// RunWaiter is implemented by a Sender that can wait for a lease
// workflow's run to close (Temporal's long poll of the run's close event).
// Without it a deferred observation is sent again every deferredRetry:
// each send is a workflow task of a lease that is busy deploying.
type RunWaiter interface {
	// AwaitRunEnd returns nil once run of lease's workflow has closed, an
	// error if it cannot tell (ctx ended, Temporal unreachable).
	AwaitRunEnd(ctx context.Context, lease, run string) error
}

// recheckMargin is added to the recheck time a workflow asks for.
const recheckMargin = 500 * time.Millisecond

// Sender delivers an observation to the lease's workflow (nil: the
// Observer is a cache only, for rollout waits and safety-net ticks).
// ErrDeferred is sent again when the deferring run ends (a DeferredError
// to a RunWaiter) or after deferredRetry; any other error than
// ErrNoWorkflow and ErrKnown (Temporal unreachable) with backoff.
//
// updateID names the update: a send that was not answered is sent again
// under the same ID (see sync), which Temporal joins to the update it
// already holds rather than admitting another.
type Sender interface {
	Send(ctx context.Context, o *Observation, updateID string) (*ObserveResult, error)
}

// Options tune an Observer.
type Options struct {
	// UnknownAfter: watches failing for longer than this make every lease
	// Unknown (default 15s).
	UnknownAfter time.Duration
	// Workers send observations concurrently (default 4).
	Workers int
	// Members, if set, shares the leases among the live workers of a
	// group: this observer sends only the observations of the leases it
	// owns (members.go). Nil: it sends for every lease.
	Members *Members
	// Leases, if set, reaches the cluster that holds the lease records,
	// when it is not the observed one: a worker's other clusters
	// (--clusters) take their leases from the worker's own.
	Leases *rest.Config
	Log    *slog.Logger
}

// Observer watches the cluster for every lease at once.
type Observer struct {
	send Sender
	wait RunWaiter // nil: a deferred observation is retried every deferredRetry
	opts Options
	log  *slog.Logger

	rs     cache.SharedIndexInformer
	rsList appslisters.ReplicaSetLister
	// sts and stsList: the stateful services' StatefulSets (issue 39).
	sts     cache.SharedIndexInformer
	stsList appslisters.StatefulSetLister
	leases  cache.SharedIndexInformer
	// direct reads the lease record from the API server, not the cache:
	// a lease is reported closed only once it confirms it.
	direct lease.Store
	queue  workqueue.TypedRateLimitingInterface[string]

	mu           sync.Mutex
	changed      map[string]chan struct{} // per namespace: closed at its next ReplicaSet event
	state        map[string]*leaseState
	failingSince time.Time // the first watch error since the last event
	// rsStale: a request of the observer's failed since the ReplicaSet
	// informer last delivered an event, so its cache may be behind the
	// cluster (after an outage its reflector waits out a backoff of up to
	// a minute before it lists again): rollouts do not wait on it.
	rsStale bool
	unknown bool     // failing for longer than UnknownAfter
	live    []string // the group's live members at the last tick
	// started: the caches and the group's members are listed (start);
	// nothing is observed before.
	started bool
	now     func() time.Time

	metrics observerMetrics
}

// leaseState is what this worker last told a lease's workflow.
type leaseState struct {
	sent      string    // the Key of the last observation the workflow has
	since     time.Time // when a service was first seen below its replicas
	recheckAt time.Time // send again then, even if unchanged
	retryAt   time.Time // deferred by a deploy: nothing is sent before then
	awaiting  string    // the deploying run whose close is awaited, if any
	// An update sent and not answered (Temporal may hold it, admitted,
	// until the workflow's next task): its ID and observation, sent
	// again as they are until answered.
	unansweredID string
	unanswered   *Observation
}

// New builds an Observer of the cluster rc reaches; Run runs it.
func New(rc *rest.Config, send Sender, opts Options) (*Observer, error) {
	o := newObserver(send, opts)
	// Every request the informers make says whether the API server can be
	// reached: a reflector retries a refused watch quietly, without calling
	// its watch error handler.
	rc = rest.CopyConfig(rc)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return reachability{o: o, next: rt} })
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	leases := rc
	if opts.Leases != nil {
		leases = opts.Leases
	}
	dyn, err := dynamic.NewForConfig(leases)
	if err != nil {
		return nil, err
	}
	o.watch(kc, dyn)
	return o, nil
}

func newObserver(send Sender, opts Options) *Observer {
	if opts.UnknownAfter <= 0 {
		opts.UnknownAfter = 15 * time.Second
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	o := &Observer{
		send: send, opts: opts, log: opts.Log.With("component", "observer"),
		state: map[string]*leaseState{}, changed: map[string]chan struct{}{}, now: time.Now,
		metrics: newObserverMetrics(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 15*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployflow-observer"}),
	}
	o.wait, _ = send.(RunWaiter)
	return o
}

// watch sets up the informers on kc and dyn.
func (o *Observer) watch(kc kubernetes.Interface, dyn dynamic.Interface) {
	// Only deployflow's ReplicaSets and StatefulSets (they carry the
	// service label), trimmed to what an observation reads.
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = manifest.ServiceLabel
	}), informers.WithTransform(trimForObservation))
	o.rs = f.Apps().V1().ReplicaSets().Informer()
	o.rsList = f.Apps().V1().ReplicaSets().Lister()
	o.sts = f.Apps().V1().StatefulSets().Informer()
	o.stsList = f.Apps().V1().StatefulSets().Lister()
	o.leases = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0).ForResource(crds.Leases).Informer()
	_ = o.leases.SetTransform(trimForObservation) // before it starts: cannot fail
	o.direct = lease.NewKubeStore(dyn)

	_, _ = o.rs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.replicaSetEvent(obj) },
		UpdateFunc: func(_, obj any) { o.replicaSetEvent(obj) },
		DeleteFunc: func(obj any) { o.replicaSetEvent(obj) },
	})
	_, _ = o.sts.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.event(leaseOfObject(obj)) },
		UpdateFunc: func(_, obj any) { o.event(leaseOfObject(obj)) },
		DeleteFunc: func(obj any) { o.event(leaseOfObject(obj)) },
	})
	_, _ = o.leases.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.event(objectName(obj)) },
		UpdateFunc: func(_, obj any) { o.event(objectName(obj)) },
		DeleteFunc: func(obj any) { o.event(objectName(obj)) },
	})
	for _, inf := range []cache.SharedIndexInformer{o.rs, o.sts, o.leases} {
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			o.watchFailed(err)
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
	}
}

// trimForObservation is what the observer's caches keep of an object:
// no managed fields, and a StatefulSet without its pod and claim
// templates, which no observation reads (issue 40.2: every worker caches
// every lease's objects). A ReplicaSet keeps its pod template: the
// rollouts' waits read the same cache (ReplicaSetsOf), and a rollout
// finds its new ReplicaSet by its template (a cache without them made
// every rollout create a new ReplicaSet at each step: make chaos found
// it).
func trimForObservation(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		o.ManagedFields = nil
	case *appsv1.StatefulSet:
		o.ManagedFields = nil
		o.Spec.Template = corev1.PodTemplateSpec{}
		o.Spec.VolumeClaimTemplates = nil
	case *unstructured.Unstructured:
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// reachability reports each request's outcome to the observer: no answer,
// or a server error, is a failure; any other answer shows the API server
// works.
type reachability struct {
	o    *Observer
	next http.RoundTripper
}

func (r reachability) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	switch {
	case err != nil && req.Context().Err() == nil:
		r.o.watchFailed(err)
	case err == nil && resp.StatusCode >= 500:
		r.o.watchFailed(fmt.Errorf("%s %s: %s", req.Method, req.URL.Path, resp.Status))
	case err == nil:
		r.o.reachable()
	}
	return resp, err
}

// Run runs the informers and the senders until ctx ends.
func (o *Observer) Run(ctx context.Context) {
	defer o.queue.ShutDown()
	go o.rs.RunWithContext(ctx)
	go o.sts.RunWithContext(ctx)
	go o.leases.RunWithContext(ctx)
	if o.send == nil {
		<-ctx.Done()
		return
	}
	if m := o.opts.Members; m != nil {
		left := make(chan struct{})
		go func() { defer close(left); m.Run(ctx) }()
		defer func() { <-left }() // its record deleted before Run returns
	}
	go o.start(ctx)
	for i := 0; i < o.opts.Workers; i++ {
		go func() {
			for o.processNext(ctx) {
			}
		}()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			o.checkWatches()
			o.checkMembers()
		}
	}
}

// start observes every lease once, as soon as the caches and the group's
// members are listed. Until then the observer sends nothing: a worker
// just started that counted itself alone (its members not yet listed)
// sent every lease's observation, each a workflow task answered "known"
// (issue 40.1), and a lease seen before the caches were listed was
// retried with backoff, up to 15 s, where listing takes a moment.
func (o *Observer) start(ctx context.Context) {
	synced := []cache.InformerSynced{o.rs.HasSynced, o.sts.HasSynced, o.leases.HasSynced}
	if m := o.opts.Members; m != nil {
		synced = append(synced, m.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return // ctx ended
	}
	o.mu.Lock()
	if m := o.opts.Members; m != nil {
		o.live = m.Live()
	}
	o.started = true
	o.mu.Unlock()
	o.enqueueAll()
}

// Synced reports whether both caches hold a full list and the watches work.
func (o *Observer) Synced() bool {
	o.mu.Lock()
	failing := !o.failingSince.IsZero()
	o.mu.Unlock()
	return !failing && o.rs.HasSynced() && o.sts.HasSynced() && o.leases.HasSynced()
}

// WaitSynced waits until Synced, or fails after timeout. Run must be
// running.
func (o *Observer) WaitSynced(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !o.Synced() {
		if time.Now().After(deadline) {
			return fmt.Errorf("the informers of leases and ReplicaSets are not in sync after %s", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Observe is the lease as the caches have it; ok is false when they are not
// in sync, or a lease the caches do not show active could not be read from
// the API server (the caller reads the API server instead).
func (o *Observer) Observe(ctx context.Context, id string) (*Observation, bool) {
	if !o.Synced() {
		return nil, false
	}
	obs, err := o.observe(ctx, id)
	if err != nil {
		return nil, false
	}
	return obs, true
}

// observe is what is seen of lease id. The cache decides only that a
// lease is active: a lease it lacks or has closed is read from the API
// server before it is reported closed (a cache can lag, or miss a lease
// during control-plane trouble, and a closed lease is torn down), and a
// record that does not parse makes the lease Unknown, never closed. An
// error is a direct read that failed: nothing is known yet.
func (o *Observer) observe(ctx context.Context, id string) (*Observation, error) {
	obs := &Observation{Lease: id}
	state, err := o.cachedLease(id)
	if err == nil && state != lease.StateActive {
		var l *lease.Lease
		switch l, err = o.direct.Get(ctx, id); {
		case errors.Is(err, lease.ErrNotFound):
			state, err = lease.StateClosed, nil // deleted
		case err == nil:
			state = l.State
		case !errors.Is(err, lease.ErrMalformed):
			return nil, fmt.Errorf("confirm lease %s closed: %w", id, err)
		}
	}
	if err != nil {
		o.log.Warn("lease record does not parse: the lease is Unknown until it does", "lease", id, "error", err)
		obs.Unknown = true
		return obs, nil
	}
	obs.Closed = state == lease.StateClosed
	rsList, _ := o.rsList.ReplicaSets(manifest.Namespace(id)).List(labels.Everything())
	obs.Services = ObserveReplicaSets(rsList)
	stsList, _ := o.stsList.StatefulSets(manifest.Namespace(id)).List(labels.Everything())
	ObserveStatefulSets(obs.Services, stsList)
	return obs, nil
}

// cachedLease is lease id's state in the cache: "" when the cache lacks it,
// an error wrapping lease.ErrMalformed when its record does not parse.
func (o *Observer) cachedLease(id string) (lease.State, error) {
	item, ok, _ := o.leases.GetStore().GetByKey(id)
	if !ok {
		return "", nil
	}
	u, isU := item.(*unstructured.Unstructured)
	if !isU {
		return "", nil
	}
	l, err := lease.FromObject(u)
	if err != nil {
		return "", err
	}
	return l.State, nil
}

// ReplicaSetsOf implements activities.ReplicaSetCache: rollouts wait on
// the shared cache instead of a watch of their own.
func (o *Observer) ReplicaSetsOf(namespace, service string) ([]*appsv1.ReplicaSet, <-chan struct{}, bool) {
	if !o.Synced() {
		return nil, nil, false
	}
	o.mu.Lock()
	if o.rsStale {
		o.mu.Unlock()
		return nil, nil, false // a rollout reads and watches the API server itself
	}
	ch := o.changed[namespace]
	if ch == nil {
		ch = make(chan struct{})
		o.changed[namespace] = ch
	}
	o.mu.Unlock()
	// Listed after taking the channel: a change in between closes it.
	list, err := o.rsList.ReplicaSets(namespace).List(labels.SelectorFromSet(labels.Set{manifest.ServiceLabel: service}))
	if err != nil {
		return nil, nil, false
	}
	return list, ch, true
}

func (o *Observer) replicaSetEvent(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	o.mu.Lock()
	o.rsStale = false // the informer lists and watches again
	if ch := o.changed[rs.Namespace]; ch != nil {
		close(ch)
		delete(o.changed, rs.Namespace)
	}
	o.mu.Unlock()
	o.event(leaseOfReplicaSet(rs))
}

// event: something of lease id changed. Any event also shows the watches
// work again after an outage.
func (o *Observer) event(id string) {
	o.reachable()
	if id != "" && o.send != nil {
		o.queue.Add(id)
	}
}

// reachable: the API server answered; after an outage every lease is
// observed again.
func (o *Observer) reachable() {
	o.mu.Lock()
	recovered := o.unknown
	o.failingSince, o.unknown = time.Time{}, false
	o.mu.Unlock()
	if recovered {
		o.log.Info("the API server answers again: observing every lease")
		o.enqueueAll()
	}
}

func (o *Observer) watchFailed(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.rsStale {
		// The rollouts waiting on the cache wake up and wait on the API
		// server instead (ReplicaSetsOf).
		o.rsStale = true
		for ns, ch := range o.changed {
			close(ch)
			delete(o.changed, ns)
		}
	}
	if o.failingSince.IsZero() {
		o.failingSince = o.now()
		o.log.Warn("watch failed; leases turn Unknown if it lasts", "after", o.opts.UnknownAfter, "error", err)
	}
}

// checkWatches turns every lease Unknown once the watches have failed for
// longer than UnknownAfter.
func (o *Observer) checkWatches() {
	o.mu.Lock()
	turn := !o.unknown && !o.failingSince.IsZero() && o.now().Sub(o.failingSince) > o.opts.UnknownAfter
	if turn {
		o.unknown = true
	}
	o.mu.Unlock()
	if turn {
		o.log.Warn("cannot observe the cluster: leases are Unknown until the watches work again")
		o.enqueueAll()
	}
}

// checkMembers re-observes every lease when the group's live members
// change: a lease whose owner left is sent by its new owner (which, not
// knowing what the workflow was told, sends it once; a duplicate is
// rejected at no cost to the workflow's history).
func (o *Observer) checkMembers() {
	m := o.opts.Members
	if m == nil {
		return
	}
	live := m.Live()
	o.mu.Lock()
	if !o.started {
		o.mu.Unlock()
		return // start takes the members once listed
	}
	changed := strings.Join(live, ",") != strings.Join(o.live, ",")
	o.live = live
	o.mu.Unlock()
	if changed {
		o.log.Info("the workers sharing the leases changed: observing every lease this worker now owns", "members", live)
		o.enqueueAll()
	}
}

// liveMembers is the group's live members as of the last tick (this
// worker alone without Members).
func (o *Observer) liveMembers() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.opts.Members == nil {
		return []string{""}
	}
	return o.live
}

// owns reports whether this worker sends lease id's observations.
func (o *Observer) owns(id string) bool {
	m := o.opts.Members
	return m == nil || m.Owns(o.liveMembers(), id)
}

// ownedLeases counts the leases in the cache this worker owns.
func (o *Observer) ownedLeases() int {
	n := 0
	for _, k := range o.leases.GetStore().ListKeys() {
		if o.owns(k) {
			n++
		}
	}
	return n
}

func (o *Observer) enqueueAll() {
	seen := map[string]bool{}
	for _, k := range o.leases.GetStore().ListKeys() {
		seen[k] = true
	}
	o.mu.Lock()
	for k := range o.state {
		seen[k] = true
	}
	o.mu.Unlock()
	for k := range seen {
		o.queue.Add(k)
	}
}

func (o *Observer) processNext(ctx context.Context) bool {
	id, shutdown := o.queue.Get()
	if shutdown {
		return false
	}
	defer o.queue.Done(id)
	if err := o.sync(ctx, id); err != nil {
		o.log.Debug("observation not delivered; retrying", "lease", id, "error", err)
		o.queue.AddRateLimited(id)
		return true
	}
	o.queue.Forget(id)
	return true
}

// sync tells lease id's workflow what is observed of it, if that differs
// from what it was last told (or a recheck is due).
func (o *Observer) sync(ctx context.Context, id string) error {
	o.mu.Lock()
	started := o.started
	o.mu.Unlock()
	if !started {
		return nil // start observes every lease once listed
	}
	if !o.owns(id) {
		// Another worker sends it; forget what this one told it, so that
		// taking it over (its owner gone) sends it afresh.
		o.mu.Lock()
		delete(o.state, id)
		o.mu.Unlock()
		return nil
	}
	o.mu.Lock()
	unknown := o.unknown
	st := o.state[id]
	if st == nil {
		st = &leaseState{}
		o.state[id] = st
	}
	now := o.now()
	o.mu.Unlock()

	var obs *Observation
	if unknown {
		obs = &Observation{Lease: id, Unknown: true}
	} else {
		if !o.rs.HasSynced() || !o.sts.HasSynced() || !o.leases.HasSynced() {
			return errors.New("caches not in sync yet")
		}
		var err error
		if obs, err = o.observe(ctx, id); err != nil {
			return err
		}
	}
	key := obs.Key()

	o.mu.Lock()
	if !obs.Unknown {
		if obs.Healthy() {
			st.since = time.Time{}
		} else if st.since.IsZero() {
			st.since = now
		}
		obs.Since = st.since
	}
	obs.At = now
	due := !st.recheckAt.IsZero() && !now.Before(st.recheckAt)
	if wait := st.retryAt.Sub(now); wait > 0 {
		o.mu.Unlock()
		o.queue.AddAfter(id, wait) // deferred by a deploy: try again then
		return nil
	}
	if key == st.sent && !due && st.unansweredID == "" {
		if wait := st.recheckAt.Sub(now); wait > 0 {
			o.queue.AddAfter(id, wait) // woken early: keep the recheck
		}
		o.mu.Unlock()
		return nil
	}
	st.recheckAt = time.Time{}
	o.mu.Unlock()

	// One update in flight per lease. A send the workflow does not answer
	// within its 10 s (its task not taken: the workflow continuing as new,
	// a loaded worker) stays admitted on the Temporal server, and each
	// new update takes another of the workflow's ten in-flight update
	// slots, its deploys' too: the official CI once saw "limit on number
	// of concurrent in-flight updates has been reached (10)" for a
	// lease's deploy. So an unanswered send goes again under its own ID,
	// which joins it, and a newer observation waits for its answer.
	o.mu.Lock()
	send, updateID := obs, st.unansweredID
	switch {
	case updateID == "":
		updateID = uuid.NewString()
	case st.unanswered.Key() != key:
		send = st.unanswered // answered first; obs right after
	}
	o.mu.Unlock()
	sendCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := o.send.Send(sendCtx, send, updateID)
	o.metrics.sends.WithLabelValues(sendResult(err)).Inc()
	answered := err == nil || errors.Is(err, ErrNoWorkflow) || errors.Is(err, ErrDeferred) || errors.Is(err, ErrKnown) || errors.Is(err, ErrRejected)
	o.mu.Lock()
	if answered {
		st.unansweredID, st.unanswered = "", nil
	} else {
		st.unansweredID, st.unanswered = updateID, send
	}
	o.mu.Unlock()
	if answered && send != obs {
		// The older observation is answered; the newer one goes next.
		defer o.queue.Add(id)
		key = send.Key()
	}
	switch {
	case errors.Is(err, ErrNoWorkflow):
		o.mu.Lock()
		delete(o.state, id)
		o.mu.Unlock()
		return nil
	case errors.Is(err, ErrDeferred):
		o.deferred(ctx, id, st, err, now) // ctx: the wait outlives the send
		return nil
	case errors.Is(err, ErrRejected):
		o.log.Warn("the lease's workflow refused an observation; sent again when the lease changes", "lease", id, "error", err)
	case err != nil && !errors.Is(err, ErrKnown):
		return err
	}
	o.mu.Lock()
	st.sent = key
	o.mu.Unlock()
	if res != nil && res.RecheckAfter > 0 {
		// A little after the workflow's time: its clock is its task's
		// start, which lags ours by the task's latency, and a recheck it
		// finds early is rejected and sent again.
		wait := res.RecheckAfter + recheckMargin
		o.mu.Lock()
		st.recheckAt = now.Add(wait)
		o.mu.Unlock()
		o.queue.AddAfter(id, wait)
	}
	o.log.Debug("observation", "lease", id, "observed", key, "accepted", err == nil)
	return nil
}

// deferred holds lease id's observations while its workflow deploys: a
// deploy ends with its run (the workflow continues as new), so the
// observer waits for that run to close and sends then, once, instead of
// asking every deferredRetry (each ask is a workflow task of the busy
// lease). Events meanwhile are held by retryAt; deferredFallback bounds a
// wait that never answers.
func (o *Observer) deferred(ctx context.Context, id string, st *leaseState, err error, now time.Time) {
	var d *DeferredError
	o.mu.Lock()
	defer o.mu.Unlock()
	st.since = time.Time{} // a rollout's own dips do not count
	if o.wait == nil || !errors.As(err, &d) || d.Run == "" || d.RetryAfter > 0 {
		retry := deferredRetry
		if d != nil && d.RetryAfter > 0 {
			retry = d.RetryAfter
		}
		st.retryAt = now.Add(retry)
		o.queue.AddAfter(id, retry)
		return
	}
	st.retryAt = now.Add(deferredFallback)
	o.queue.AddAfter(id, deferredFallback)
	if st.awaiting == d.Run {
		return // already waiting on this run
	}
	st.awaiting = d.Run
	go func() {
		werr := o.wait.AwaitRunEnd(ctx, id, d.Run)
		if ctx.Err() != nil {
			return
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.state[id] != st || st.awaiting != d.Run {
			return // forgotten (another worker owns it) or waiting on a later run
		}
		st.awaiting = ""
		if werr != nil {
			o.log.Debug("could not wait for the deploy's end; asking again shortly", "lease", id, "run", d.Run, "error", werr)
			st.retryAt = o.now().Add(deferredRetry)
			o.queue.AddAfter(id, deferredRetry)
			return
		}
		st.retryAt = time.Time{}
		o.queue.Add(id)
	}()
}

func sendResult(err error) string {
	switch {
	case err == nil:
		return SentAccepted
	case errors.Is(err, ErrKnown):
		return SentKnown
	case errors.Is(err, ErrDeferred):
		return SentDeferred
	case errors.Is(err, ErrNoWorkflow):
		return SentNoWorkflow
	case errors.Is(err, ErrRejected):
		return SentRejected
	}
	return SentError
}

// leaseOfReplicaSet is the lease whose namespace holds the ReplicaSet, or "".
func leaseOfReplicaSet(rs *appsv1.ReplicaSet) string {
	id, _ := strings.CutPrefix(rs.Namespace, manifest.NamespacePrefix)
	if id == rs.Namespace {
		return "" // a standalone rollout's namespace: no lease
	}
	return id
}

// leaseOfObject is the lease whose namespace holds a watched object (a
// StatefulSet), or "".
func leaseOfObject(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return ""
	}
	id, _ := strings.CutPrefix(o.GetNamespace(), manifest.NamespacePrefix)
	if id == o.GetNamespace() {
		return ""
	}
	return id
}

func objectName(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Key
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.GetName()
	}
	return ""
}
