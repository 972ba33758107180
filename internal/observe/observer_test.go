package observe

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// Unit tests of the observer's decisions on client-go's fake clients (the
// integration tests run it against the real API server and Temporal).

// fakeSender records what the observer sent and answers as told.
type fakeSender struct {
	mu     sync.Mutex
	sent   []string    // Observation.Key of each send
	ids    []string    // the update ID of each send
	ats    []time.Time // the Observation.At of each send
	answer func(o *Observation) (*ObserveResult, error)
}

func (f *fakeSender) Send(_ context.Context, o *Observation, updateID string) (*ObserveResult, error) {
	f.mu.Lock()
	f.sent = append(f.sent, o.Key())
	f.ids = append(f.ids, updateID)
	f.ats = append(f.ats, o.At)
	answer := f.answer
	f.mu.Unlock()
	if answer == nil {
		return &ObserveResult{}, nil
	}
	return answer(o)
}

func (f *fakeSender) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent...)
}

func leaseRecord(id, state string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crds.APIVersion, "kind": crds.KindLease,
		"metadata": map[string]any{"name": id},
		"spec":     map[string]any{"owner": "acme", "state": state},
	}}
}

func replicaSet(lease string, replicas, available int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "lease-" + lease,
			Labels:      map[string]string{manifest.ServiceLabel: "web"},
			Annotations: map[string]string{rollout.RevisionAnnotation: "1", rollout.DesiredReplicasAnnotation: "3"}},
		Spec:   appsv1.ReplicaSetSpec{Replicas: &replicas},
		Status: appsv1.ReplicaSetStatus{AvailableReplicas: available},
	}
}

type observerTest struct {
	o    *Observer
	send *fakeSender
	kc   *fake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
}

func newObserverTest(t *testing.T, answer func(*Observation) (*ObserveResult, error)) *observerTest {
	f := &fakeSender{answer: answer}
	return startObserverTest(t, f, f)
}

// startObserverTest runs an observer of lease "a" sending through send (f
// or a wrapper of it).
func startObserverTest(t *testing.T, f *fakeSender, send Sender) *observerTest {
	kc := fake.NewClientset(replicaSet("a", 3, 3))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crds.Leases: "LeaseList"}, leaseRecord("a", "active"))
	ot := &observerTest{send: f, kc: kc, dyn: dyn}
	ot.o = newObserver(send, Options{Log: slog.New(slog.DiscardHandler)})
	ot.o.watch(kc, dyn)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ot.o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, ot.o.Synced, 10*time.Second, 10*time.Millisecond)
	return ot
}

const (
	healthy   = "closed=false unknown=false web:true"
	unhealthy = "closed=false unknown=false web:false"
)

func (ot *observerTest) waitSent(t *testing.T, want ...string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(ot.send.keys()) >= len(want) }, 10*time.Second, 10*time.Millisecond,
		"want %q sent, got %q", want, ot.send.keys())
	time.Sleep(200 * time.Millisecond) // nothing more arrives
	assert.Equal(t, want, ot.send.keys())
}

func (ot *observerTest) scale(t *testing.T, replicas, available int32) {
	t.Helper()
	_, err := ot.kc.AppsV1().ReplicaSets("lease-a").Update(context.Background(), replicaSet("a", replicas, available), metav1.UpdateOptions{})
	require.NoError(t, err)
}

// The lease's state is sent once when first seen, then only when the
// verdict changes: pod churn above the desired replicas is no news.
func TestObserverSendsOnlyChanges(t *testing.T) {
	before := time.Now()
	ot := newObserverTest(t, nil)
	ot.waitSent(t, healthy)
	// Each says when it was read (a workflow's next run takes none read
	// before it started: workflows/lease/observe.go).
	ot.send.mu.Lock()
	at := ot.send.ats[0]
	ot.send.mu.Unlock()
	assert.True(t, !at.Before(before) && !at.After(time.Now()), "read at %v", at)
	ot.scale(t, 3, 4) // more available than desired: the same verdict
	ot.waitSent(t, healthy)
	ot.scale(t, 0, 0) // scaled to 0 by hand
	ot.waitSent(t, healthy, unhealthy)
	_, err := ot.dyn.Resource(crds.Leases).Update(context.Background(), leaseRecord("a", "closed"), metav1.UpdateOptions{})
	require.NoError(t, err)
	ot.waitSent(t, healthy, unhealthy, "closed=true unknown=false web:false")
}

// What the workflow already has (another worker told it) is not sent
// again; a lease with no workflow is forgotten; a recheck the workflow asks
// for is sent even though nothing changed.
func TestObserverHonoursTheWorkflowsAnswers(t *testing.T) {
	var mu sync.Mutex
	answers := []error{ErrKnown}
	recheck := 1
	ot := newObserverTest(t, func(o *Observation) (*ObserveResult, error) {
		mu.Lock()
		defer mu.Unlock()
		var err error
		if len(answers) > 0 {
			err, answers = answers[0], answers[1:]
		}
		if o.Key() == unhealthy && recheck > 0 {
			recheck--
			return &ObserveResult{RecheckAfter: 300 * time.Millisecond}, err
		}
		return &ObserveResult{}, err
	})
	ot.waitSent(t, healthy) // known: not resent
	ot.scale(t, 0, 0)
	ot.waitSent(t, healthy, unhealthy, unhealthy) // taken, then the recheck it asked for
	mu.Lock()
	answers = []error{ErrNoWorkflow}
	mu.Unlock()
	ot.scale(t, 3, 3)
	ot.waitSent(t, healthy, unhealthy, unhealthy, healthy)
	ot.o.mu.Lock()
	_, tracked := ot.o.state["a"]
	ot.o.mu.Unlock()
	assert.False(t, tracked, "a lease with no workflow is forgotten")
}

func (f *fakeSender) updateIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}

// Issue 40: one update in flight per lease. A send the workflow does not
// answer (its task not taken within the send's time) stays admitted on
// the Temporal server; before, each retry was a new update, and a lease
// whose workflow was slow filled the workflow's ten in-flight update
// slots, its deploys' too ("limit on number of concurrent in-flight
// updates has been reached (10)", official CI). Now it goes again under
// its own ID, which Temporal joins to the one it holds; a newer
// observation waits for that answer, then goes under a new ID.
func TestObserverSendsAnUnansweredUpdateAgainUnderItsOwnID(t *testing.T) {
	var mu sync.Mutex
	unanswered := 3
	ot := newObserverTest(t, func(o *Observation) (*ObserveResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if unanswered > 0 {
			unanswered--
			return nil, context.DeadlineExceeded
		}
		return &ObserveResult{}, nil
	})
	ot.waitSent(t, healthy, healthy, healthy, healthy)
	ids := ot.send.updateIDs()
	assert.Equal(t, []string{ids[0], ids[0], ids[0], ids[0]}, ids, "one update, sent until answered")

	// Unanswered while the lease changes: the older observation is
	// answered first, under its ID, then the newer under a new one. The
	// workflow answers nothing until the cache has the change (a retry's
	// timing decided before whether it saw the change: the test failed
	// when the resend came after the lease was unhealthy again).
	mu.Lock()
	unanswered = 1 << 30
	mu.Unlock()
	ot.scale(t, 0, 0)
	require.Eventually(t, func() bool { return len(ot.send.keys()) >= 5 }, 10*time.Second, 10*time.Millisecond)
	ot.scale(t, 3, 3)
	require.Eventually(t, func() bool { return len(ot.send.keys()) >= 6 }, 10*time.Second, 10*time.Millisecond, "never sent again")
	mu.Lock()
	unanswered = 0
	mu.Unlock()
	require.Eventually(t, func() bool {
		k := ot.send.keys()
		return k[len(k)-1] == healthy
	}, 10*time.Second, 10*time.Millisecond, "the newer observation never went: sent %q", ot.send.keys())
	ot.scale(t, 3, 2)
	require.Eventually(t, func() bool {
		k := ot.send.keys()
		return k[len(k)-1] == unhealthy
	}, 10*time.Second, 10*time.Millisecond, "sent %q", ot.send.keys())
	time.Sleep(200 * time.Millisecond)
	keys, ids := ot.send.keys(), ot.send.updateIDs()
	last := len(keys) - 1
	newer := slices.Index(keys[4:], healthy) + 4
	require.Greater(t, newer, 5, "sent %q", keys)
	for i := 4; i < newer; i++ {
		assert.Equal(t, unhealthy, keys[i], "send %d: the first unhealthy, sent again as it was, whatever was seen meanwhile", i)
		assert.Equal(t, ids[4], ids[i], "send %d: under the same ID", i)
	}
	for i := newer; i <= last; i++ {
		assert.NotEqual(t, ids[4], ids[i], "once answered, what follows is a new update")
	}
	assert.NotEqual(t, ids[newer], ids[last], "each newer observation is its own update")
	assert.Equal(t, unhealthy, keys[last], "the lease's latest state is what the workflow has")
}

// An observation the workflow refuses outright (ErrRejected: a run
// without the update, say) is answered: not sent again, so it does not
// hold the lease's one update; the next change goes (review).
func TestObserverDoesNotResendARefusedObservation(t *testing.T) {
	var mu sync.Mutex
	refuse := true
	ot := newObserverTest(t, func(o *Observation) (*ObserveResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return nil, ErrRejected
		}
		return &ObserveResult{}, nil
	})
	ot.waitSent(t, healthy)
	mu.Lock()
	refuse = false
	mu.Unlock()
	ot.scale(t, 0, 0)
	ot.waitSent(t, healthy, unhealthy)
	ids := ot.send.updateIDs()
	assert.NotEqual(t, ids[0], ids[1])
	// The metric says what the workflow answered: a refusal is not an
	// error of Temporal's (it was counted as one, issue 40.1).
	assert.Equal(t, 1.0, testutil.ToFloat64(ot.o.metrics.sends.WithLabelValues(SentRejected)))
	assert.Equal(t, 0.0, testutil.ToFloat64(ot.o.metrics.sends.WithLabelValues(SentError)))
	assert.Equal(t, 1.0, testutil.ToFloat64(ot.o.metrics.sends.WithLabelValues(SentAccepted)))
}

// A deploy in progress defers the observation: it is sent again, later.
func TestObserverRetriesADeferredObservation(t *testing.T) {
	var mu sync.Mutex
	deferred := 1
	ot := newObserverTest(t, func(*Observation) (*ObserveResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if deferred > 0 {
			deferred--
			return nil, ErrDeferred
		}
		return &ObserveResult{}, nil
	})
	require.Eventually(t, func() bool { return len(ot.send.keys()) == 2 }, 10*time.Second, 50*time.Millisecond,
		"sent again after the deploy: %q", ot.send.keys())
	assert.Equal(t, []string{healthy, healthy}, ot.send.keys())
}

// waitingSender is a fakeSender that can wait for a run's end: the run
// ends when the test closes ended.
type waitingSender struct {
	*fakeSender
	ended   chan struct{}
	waitsMu sync.Mutex
	waits   []string // the runs waited on
}

func (w *waitingSender) AwaitRunEnd(ctx context.Context, lease, run string) error {
	w.waitsMu.Lock()
	w.waits = append(w.waits, lease+"/"+run)
	w.waitsMu.Unlock()
	select {
	case <-w.ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Issue 22, the observer's cost during a fleet: an observation deferred by
// a deploying run is sent again when that run ends, not every 2 s while it
// deploys (each send is a workflow task of the busy lease; 996 such sends
// in a 612-deploy bench before the fix), and events meanwhile send
// nothing. Before the fix the observer sent it again after deferredRetry,
// and again every 2 s as long as the deploy ran.
func TestObserverSendsADeferredObservationWhenTheDeployingRunEnds(t *testing.T) {
	var mu sync.Mutex
	deploying := true
	ws := &waitingSender{ended: make(chan struct{})}
	ws.fakeSender = &fakeSender{answer: func(*Observation) (*ObserveResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if deploying {
			return nil, &DeferredError{Run: "run-1"}
		}
		return &ObserveResult{}, nil
	}}
	ot := startObserverTest(t, ws.fakeSender, ws)

	ot.waitSent(t, healthy) // deferred by run-1
	ot.scale(t, 3, 1)       // the rollout's own churn: held, not sent
	time.Sleep(deferredRetry + time.Second)
	assert.Equal(t, []string{healthy}, ot.send.keys(), "nothing is sent while the deploying run runs")
	ws.waitsMu.Lock()
	assert.Equal(t, []string{"a/run-1"}, ws.waits, "the observer waits on the run that deferred it, once")
	ws.waitsMu.Unlock()

	mu.Lock()
	deploying = false
	mu.Unlock()
	ended := time.Now()
	close(ws.ended) // the deploy ends: its run continues as new
	ot.waitSent(t, healthy, unhealthy)
	assert.Less(t, time.Since(ended), deferredRetry, "sent as the run ended")
}

// A workflow only between two waits (its run starting, or acting on an
// observation) says how soon to send again: that run is not deploying and
// will not end, so the observer does not wait for its end.
func TestObserverSendsAgainWhenABusyWorkflowSays(t *testing.T) {
	var mu sync.Mutex
	busy := 1
	ws := &waitingSender{ended: make(chan struct{})}
	ws.fakeSender = &fakeSender{answer: func(*Observation) (*ObserveResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if busy > 0 {
			busy--
			return nil, &DeferredError{Run: "run-1", RetryAfter: 200 * time.Millisecond}
		}
		return &ObserveResult{}, nil
	}}
	ot := startObserverTest(t, ws.fakeSender, ws)
	ot.waitSent(t, healthy, healthy)
	ws.waitsMu.Lock()
	assert.Empty(t, ws.waits, "no wait for the end of a run that is not deploying")
	ws.waitsMu.Unlock()
}

// Issue 20.9, no teardown on a guess: a lease missing from the observer's
// cache (a lagging or partial list during control-plane trouble) is read
// from the API server before it is reported closed. Before the fix the
// observer reported it Closed, and the lease's workflow tore it down.
func TestObserverConfirmsALeaseMissingFromItsCacheBeforeReportingItClosed(t *testing.T) {
	ot := newObserverTest(t, nil)
	ot.waitSent(t, healthy)
	item, ok, err := ot.o.leases.GetStore().GetByKey("a")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, ot.o.leases.GetStore().Delete(item)) // the cache lost it; the API server has it, active

	obs, ok := ot.o.Observe(context.Background(), "a")
	require.True(t, ok)
	assert.False(t, obs.Closed, "a lease absent from the cache but active on the API server is not closed")
	assert.False(t, obs.Unknown)
	ot.o.event("a")
	ot.waitSent(t, healthy) // nothing new to tell

	// Deleted on the API server too: now it is closed.
	require.NoError(t, ot.dyn.Resource(crds.Leases).Delete(context.Background(), "a", metav1.DeleteOptions{}))
	ot.waitSent(t, healthy, "closed=true unknown=false web:true")
}

// Issue 20.9: a lease record that does not parse (an unknown state, a
// closedAt that is not a time) makes the lease Unknown, never closed.
// Before the fix a state other than "active" read as closed.
func TestObserverReportsAMalformedLeaseRecordUnknownNotClosed(t *testing.T) {
	ot := newObserverTest(t, nil)
	ot.waitSent(t, healthy)
	bad := leaseRecord("a", "suspended")
	_, err := ot.dyn.Resource(crds.Leases).Update(context.Background(), bad, metav1.UpdateOptions{})
	require.NoError(t, err)
	ot.waitSent(t, healthy, "closed=false unknown=true")

	bad = leaseRecord("a", "closed")
	require.NoError(t, unstructured.SetNestedField(bad.Object, "yesterday", "spec", "closedAt"))
	_, err = ot.dyn.Resource(crds.Leases).Update(context.Background(), bad, metav1.UpdateOptions{})
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	for _, k := range ot.send.keys() {
		assert.NotContains(t, k, "closed=true", "a record that does not parse is never closed")
	}
	obs, ok := ot.o.Observe(context.Background(), "a")
	require.True(t, ok)
	assert.True(t, obs.Unknown)
	assert.False(t, obs.Closed)
}

// Found by make chaos: after a 30 s outage of the API server, rollouts
// waiting on the shared cache went on a minute after it came back (worst
// recovery 1m33s), for the cache's reflector waits out a backoff of up to
// a minute before it lists again. Once a request of the observer fails,
// the cache no longer serves rollouts (they read and watch the API server
// themselves), and those waiting on it wake up; it serves them again once
// the ReplicaSet informer delivers again.
func TestTheCacheStopsServingRolloutsOnceARequestFails(t *testing.T) {
	ot := newObserverTest(t, nil)
	_, changed, ok := ot.o.ReplicaSetsOf("lease-a", "web")
	require.True(t, ok, "a synced cache serves")

	ot.o.watchFailed(errors.New("connection refused"))
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("a rollout waiting on the cache was not woken")
	}
	_, _, ok = ot.o.ReplicaSetsOf("lease-a", "web")
	assert.False(t, ok, "the cache may be behind: it does not serve")

	ot.scale(t, 3, 2) // an event: the informer lists and watches again
	require.Eventually(t, func() bool { _, _, ok := ot.o.ReplicaSetsOf("lease-a", "web"); return ok }, 10*time.Second, 10*time.Millisecond,
		"the cache serves again once its informer delivers")
}
