// Package testenv is the shared harness of deployflow's integration tests.
// It makes sure the local stack (make dev-up) is running, starting it if it
// is not, and hands each test a Kubernetes client, a Temporal client, a fresh
// namespace and its own task queue with an in-process worker.
//
// When the stack cannot be started a test is skipped locally but fails on CI
// (CI=true): integration tests never silently skip there.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/metrics"
	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/internal/query"
	"github.com/deployflow/deployflow/internal/searchattr"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/k8s/kube"
	"github.com/deployflow/deployflow/worker/app"
)

// Env is the running local stack.
type Env struct {
	Stack      *devstack.Stack
	RESTConfig *rest.Config
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
	Temporal   client.Client
	// TemporalNamespace is the Temporal namespace Temporal's client is in.
	TemporalNamespace string

	noRecord bool // its workers' histories are not recorded (WithCodec)
	// dc is the data converter Temporal was dialled with (nil: the SDK's).
	dc converter.DataConverter
}

// Patient is Temporal with queries that wait as long as a busy workflow
// takes to answer on a loaded server (internal/query), as the CLI's do:
// for the tests' queries, Temporal (which workers need) for the rest.
func (e *Env) Patient() client.Client {
	return query.Patient(e.Temporal, e.TemporalNamespace, e.dc)
}

// Settings of the tests' in-process workers.
var (
	// IPPool is the range test leases get declared IPs from.
	IPPool = netip.MustParsePrefix("10.200.0.0/16")
	// BlockedHostnames are refused to every lease.
	BlockedHostnames = []string{"forbidden.example.com", ".blocked.example.com"}
)

var (
	once      sync.Once
	shared    *Env
	sharedErr error
)

// Get returns the local stack, starting it on first use in this test
// binary, and runs the test side by side with the package's other live
// tests (see parallel).
func Get(t testing.TB) *Env {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("integration test: skipped with -short")
	}
	parallel(t)
	return stack(t)
}

// GetSerial is Get for a test that does not run beside the others: one
// that sets the process's environment (t.Setenv), which every test of the
// binary reads. Go runs it before the parallel ones.
func GetSerial(t testing.TB) *Env {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("integration test: skipped with -short")
	}
	return stack(t)
}

func stack(t testing.TB) *Env {
	t.Helper()
	once.Do(func() { shared, sharedErr = setUp() })
	if sharedErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("local stack unavailable (CI=true, integration tests must run): %v", sharedErr)
		}
		t.Skipf("local stack unavailable (run 'make dev-up'): %v", sharedErr)
	}
	return shared
}

func setUp() (*Env, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	repo, err := devstack.FindRepo(wd)
	if err != nil {
		return nil, err
	}
	s, err := devstack.New(repo, searchattr.Registration())
	if err != nil {
		return nil, err
	}
	s.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "testenv: "+f+"\n", a...) }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if _, err := s.Up(ctx); err != nil {
		return nil, err
	}
	cfg, err := kube.RESTConfig(s.Kubeconfig(), "", "deployflow-test")
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := crds.Install(ctx, dyn); err != nil {
		return nil, fmt.Errorf("install CRDs: %w", err)
	}
	tc, err := client.DialContext(ctx, client.Options{
		HostPort: devstack.TemporalAddress,
		Logger:   sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	if err != nil {
		return nil, err
	}
	return &Env{Stack: s, RESTConfig: cfg, Kube: kc, Dynamic: dyn, Temporal: tc, TemporalNamespace: "default"}, nil
}

// Serial names the tests that run alone (make test's serial phase, with
// -run): they stop parts of the stack (TestDisruptive*) or need no other
// test around (TestAlone*). Every other live test runs side by side with
// its package's others: each has its own lease, namespace, task queue and
// worker, and most of a live test is waiting (pods turning Ready, timers,
// a progress deadline), so waiting together is what keeps make test short.
var Serial = regexp.MustCompile(`^Test(Disruptive|Alone)`)

var parallelTests sync.Map // testing.TB -> struct{}: marked already

// parallel marks a top-level live test parallel (once: Get may be called
// again in the test). A subtest is left as it is, so its parent's code
// after t.Run still runs after it; a Serial test runs alone.
func parallel(t testing.TB) {
	pt, ok := t.(*testing.T)
	if !ok || strings.Contains(pt.Name(), "/") || Serial.MatchString(pt.Name()) {
		return
	}
	if _, marked := parallelTests.LoadOrStore(pt, struct{}{}); !marked {
		pt.Parallel()
	}
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9-]+`)

// Name is a DNS-1123 label unique to this test: prefix, test name, random.
func Name(t testing.TB, prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	base := unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "-")
	if max := 63 - len(prefix) - 8; len(base) > max {
		base = base[:max]
	}
	return strings.Trim(prefix+"-"+strings.Trim(base, "-"), "-") + "-" + hex.EncodeToString(b)
}

// ShortName is prefix and 8 random hex digits: unique names for things with
// tight length limits (lease IDs).
func ShortName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// Namespace creates a fresh namespace, waits until pods can be created in it
// and deletes it when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	name := Name(t, "t")
	// Labelled as deployflow's, so rollouts may act in it.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "deployflow"}}}
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := e.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete namespace %s: %v", name, err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.Kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return name
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s: default ServiceAccount never appeared: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Activities are the activities as the worker wires them, on the test
// clients, with metrics in a registry of their own.
func (e *Env) Activities() *activities.Activities {
	a := app.Activities(e.Kube, e.Dynamic, IPPool, BlockedHostnames, metrics.New(prometheus.NewRegistry()))
	a.Prometheus, _ = app.PrometheusAPI(devstack.PrometheusURL) // the stack's
	a.AllowedPodKeys = devstack.KwokKnobs                       // as the stack's workers (bin/devstack env)
	return a
}

// Worker starts an in-process deployflow worker on a task queue of its own,
// stopped when the test ends, and returns the task queue.
func (e *Env) Worker(t testing.TB) string { return e.WorkerWith(t, nil) }

// WorkerWith is Worker with the activities' wiring changed by configure
// (a webhook, another Prometheus), as the worker's flags would.
func (e *Env) WorkerWith(t testing.TB, configure func(*activities.Activities)) string {
	t.Helper()
	return e.worker(t, configure, nil)
}

// worker starts a worker on a task queue of its own with configure's
// activities and what more registers on it.
func (e *Env) worker(t testing.TB, configure func(*activities.Activities), more func(tq string, w worker.Worker)) string {
	t.Helper()
	tq := Name(t, "tq")
	if !e.noRecord {
		e.recordHistories(t, tq)
	}
	stickyOnce.Do(func() {
		if n, err := strconv.Atoi(os.Getenv(StickyCacheEnv)); err == nil {
			worker.SetStickyWorkflowCacheSize(n) // process-wide, before the first worker starts
		}
	})
	w := worker.New(e.Temporal, tq, worker.Options{WorkerStopTimeout: 2 * time.Second})
	acts := e.Activities()
	acts.Observer = e.cache(t)
	if configure != nil {
		configure(acts)
	}
	app.Register(w, acts)
	if more != nil {
		more(tq, w)
	}
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(w.Stop)
	return tq
}

// StickyCacheEnv sets the in-process workers' workflow cache size (the
// SDK's default: 10,000). 0 keeps no workflow cached, so every workflow
// task replays its workflow from the whole history: a decision that is not
// deterministic fails its test there instead of at a worker's restart
// (docs/testing.md).
const StickyCacheEnv = "DEPLOYFLOW_TEST_STICKY_CACHE"

var stickyOnce sync.Once

var (
	cacheOnce sync.Once
	cacheObs  *observe.Observer
	cacheErr  error
)

// cache is one observer per test binary that sends nothing: the shared
// informer cache the in-process workers' rollouts wait on and their
// safety-net ticks read, as the worker binary's do. (Tests that need
// observations sent start an Observer of their own.)
func (e *Env) cache(t testing.TB) *observe.Observer {
	t.Helper()
	cacheOnce.Do(func() {
		cacheObs, cacheErr = observe.New(e.RESTConfig, nil, observe.Options{Log: slog.New(slog.DiscardHandler)})
		if cacheErr != nil {
			return
		}
		go cacheObs.Run(context.Background())
		cacheErr = cacheObs.WaitSynced(30 * time.Second)
	})
	if cacheErr != nil {
		t.Fatalf("shared informer cache: %v", cacheErr)
	}
	return cacheObs
}

// Observer runs a worker's observer (as --observe does) on the test
// clients until the test ends: idle lease workflows of every task queue
// hear from it. unknownAfter is its outage threshold (0: the default).
func (e *Env) Observer(t testing.TB, unknownAfter time.Duration) *observe.Observer {
	t.Helper()
	level := slog.LevelInfo
	if os.Getenv("DEPLOYFLOW_LOG_LEVEL") == "debug" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	o, err := observe.New(e.RESTConfig, app.TemporalSender{Client: e.Temporal}, observe.Options{UnknownAfter: unknownAfter, Log: log})
	if err != nil {
		t.Fatalf("observer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := o.WaitSynced(30 * time.Second); err != nil {
		t.Fatalf("observer: %v", err)
	}
	return o
}

// ScaleService sets every ReplicaSet of a lease's service to n by hand,
// as `kubectl scale rs` would.
func (e *Env) ScaleService(t testing.TB, lease, service string, n int32) {
	t.Helper()
	ctx := context.Background()
	ns := manifest.Namespace(lease)
	rss := e.Kube.AppsV1().ReplicaSets(ns)
	list, err := rss.List(ctx, metav1.ListOptions{LabelSelector: manifest.ServiceLabel + "=" + service})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("lease %s: ReplicaSets of %s: %v (found %d)", lease, service, err, len(list.Items))
	}
	for _, rs := range list.Items {
		// As kubectl scale: read, set, write, again on a conflict (the
		// ReplicaSet controller writes its status meanwhile; "the object
		// has been modified" failed a test, CI run 82).
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := rss.GetScale(ctx, rs.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Replicas = n
			_, err = rss.UpdateScale(ctx, rs.Name, s, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("scale ReplicaSet %s/%s to %d: %v", ns, rs.Name, n, err)
		}
	}
}

// Tool is the path of a pinned tool of the stack (helm, kubectl, ...),
// built if the cache lacks it; the stack itself need not run.
func Tool(t testing.TB, name string) string {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("needs the pinned tools (make tools): skipped with -short")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	repo, err := devstack.FindRepo(wd)
	if err != nil {
		t.Fatal(err)
	}
	s, err := devstack.New(repo, searchattr.Registration())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := s.EnsureBinaries(ctx); err != nil {
		t.Fatalf("build the pinned tools: %v", err)
	}
	return s.Bin(name)
}

// Eventually polls cond every tick until it holds, and fails the test if
// it has not within the given time, saying what it waited for and what
// cond last reported. (testify's Eventually formats its message when it is
// called, so a "last seen" argument there is always the zero value.)
func Eventually(t testing.TB, within, tick time.Duration, what string, cond func() (ok bool, last string)) {
	t.Helper()
	var last string
	deadline := time.Now().Add(within)
	for {
		ok, l := cond()
		if ok {
			return
		}
		last = l
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last: %s)", what, within, last)
		}
		time.Sleep(tick)
	}
}

// WaitForControllers waits, up to timeout, until the stack's own
// controllers work again: a new namespace gets its default ServiceAccount
// (kube-controller-manager) and a one-replica ReplicaSet there its pod
// available (the ReplicaSet controller, the scheduler and kwok). After an
// outage of the API server their informers back off for up to a minute; a
// test that stops it calls this before it ends, so the tests after it (the
// PostgreSQL phase follows make test's last) find the stack as it was.
func (e *Env) WaitForControllers(t testing.TB, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	name := Name(t, "recovered")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	defer func() { _ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) }()
	one := int32(1)
	labels := map[string]string{"app": "probe"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: name},
		Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{AutomountServiceAccountToken: new(false), Containers: []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}}}}},
	}
	Eventually(t, timeout, 250*time.Millisecond, "the stack's controllers never worked again", func() (bool, string) {
		if _, err := e.Kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, "no default ServiceAccount: " + err.Error()
		}
		got, err := e.Kube.AppsV1().ReplicaSets(name).Get(ctx, "probe", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			got, err = e.Kube.AppsV1().ReplicaSets(name).Create(ctx, rs, metav1.CreateOptions{})
		}
		if err != nil {
			return false, "probe ReplicaSet: " + err.Error()
		}
		return got.Status.AvailableReplicas == 1, fmt.Sprintf("probe ReplicaSet: %d available", got.Status.AvailableReplicas)
	})
}

// DataPlane skips a test that sends requests to pods where the stack's
// data plane is off (outside CI: its route needs CAP_NET_ADMIN), and
// fails it in CI.
func DataPlane(t testing.TB) {
	t.Helper()
	if on, why := devstack.DataPlaneOn(context.Background()); !on {
		if os.Getenv("CI") != "" {
			t.Fatalf("the local stack's data plane is off: %s", why)
		}
		t.Skipf("the local stack's data plane is off: %s", why)
	}
}

// Update sends an update and waits for its result (into result, if not
// nil), as the CLI does: under one update ID, sent again while Temporal
// answers that the workflow's task is failing (WorkflowNotReady, "Workflow
// Task in failed state": on a loaded server a task now and then fails
// once, "premature end of stream", and is retried; CI run 84 failed a
// test on it). Any other error, the workflow's refusal included, is
// returned as it is.
func (e *Env) Update(ctx context.Context, opts client.UpdateWorkflowOptions, result any) error {
	if opts.UpdateID == "" {
		opts.UpdateID = uuid.NewString()
	}
	if opts.WaitForStage == client.WorkflowUpdateStageUnspecified {
		opts.WaitForStage = client.WorkflowUpdateStageCompleted
	}
	var h client.WorkflowUpdateHandle
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		h, err = e.Temporal.UpdateWorkflow(ctx, opts)
		var notReady *serviceerror.WorkflowNotReady
		if errors.As(err, &notReady) {
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, result)
}
