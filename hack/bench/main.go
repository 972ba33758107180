// Command bench runs the same rollout with deployflow's engine and with the
// native Kubernetes Deployment controller on the local stack, and prints for
// each: wall time, Temporal history events and kube-apiserver requests made
// by the rollout driver (counted from the apiserver's audit log by user
// agent). Then the same for a StatefulSet (statefulset.go): deployflow's
// partition steps against the native StatefulSet controller's rolling
// update, with the order in which each replaced the pods. Then the fleet
// benchmark (fleet.go): many leases deployed at once by the worker binary,
// then left idle. make bench runs it with the stack up.
//
//	bench [-replicas 10] [-ready-after 1s] [-runs 3] [-statefulset-replicas 5] [-statefulset-runs 3] [-traffic 4] [-fleet 10,100,500] [-idle 1000] [-idle-for 10m]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/internal/searchattr"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/k8s/kube"
	"github.com/deployflow/deployflow/k8s/rollout"
	"github.com/deployflow/deployflow/worker/app"
)

// out is where the tables go (a test reads them).
var out io.Writer = os.Stdout

const (
	engineAgent = "deployflow-bench-engine"
	nativeAgent = "/deployment-controller" // suffix kube-controller-manager gives that controller's client
)

type bench struct {
	stack      *devstack.Stack
	kube       kubernetes.Interface
	temporal   client.Client
	taskQueue  string
	replicas   int32
	readyAfter time.Duration
}

type result struct {
	wall     time.Duration
	requests int
	events   int
}

func main() {
	replicas := flag.Int("replicas", 10, "replicas of the benchmarked service")
	readyAfter := flag.Duration("ready-after", time.Second, "kwok readiness delay of every pod")
	runs := flag.Int("runs", 3, "rollouts per driver (the median is reported); 0: skip the rollout comparison")
	fleetSizes := flag.String("fleet", "10,100,500", "fleet benchmark: comma-separated numbers of concurrent lease deploys; empty: skip it")
	idle := flag.Int("idle", 1000, "fleet benchmark: idle leases measured (deployed beyond the fleets if needed)")
	idleFor := flag.Duration("idle-for", 10*time.Minute, "fleet benchmark: how long the idle leases are measured")
	flag.IntVar(&statefulReplicas, "statefulset-replicas", statefulReplicas, "StatefulSet comparison: replicas of the stateful service; 0: skip it")
	flag.IntVar(&statefulRuns, "statefulset-runs", statefulRuns, "StatefulSet comparison: rollouts per driver (the median is reported)")
	flag.IntVar(&trafficCanaries, "traffic", trafficCanaries, "traffic benchmark: canaries through the stack's Gateway (the last aborted); 0: skip it")
	flag.StringVar(&temporalNamespace, "temporal-namespace", temporalNamespace, "the Temporal namespace the bench's workflows and workers use")
	flag.IntVar(&workerStickyCache, "worker-sticky-cache-size", workerStickyCache, "fleet benchmark and scale mode: the workers' --sticky-cache-size (workflows kept in memory between tasks); 0: the worker's default")
	flag.IntVar(&scaleLeases, "scale", scaleLeases, "scale mode (make bench-scale): hold this many idle leases on -scale-workers workers and measure them; the other comparisons are skipped; 0: off")
	flag.IntVar(&scaleWorkers, "scale-workers", scaleWorkers, "scale mode: workers sharing the leases")
	flag.DurationVar(&scaleHold, "scale-hold", scaleHold, "scale mode: how long the idle leases are held, the workers' memory sampled every -scale-sample")
	flag.DurationVar(&scaleSample, "scale-sample", scaleSample, "scale mode: how often the workers' memory is read during the hold")
	flag.IntVar(&scaleInFlight, "scale-in-flight", scaleInFlight, "scale mode: the leases' first deploys under way at once while the fleet is created")
	flag.BoolVar(&scaleLeaveLeases, "scale-leave-leases", os.Getenv("DEPLOYFLOW_STACK_DISPOSABLE") == "1",
		"scale mode: leave the leases in place at the end instead of closing each one (the stack's teardown removes them; hack/with-stack.sh sets DEPLOYFLOW_STACK_DISPOSABLE=1 when it started the stack and will stop it)")
	flag.StringVar(&scaleStatePath, "scale-state", "", "scale mode: a file that carries the fleet's creation across invocations (and sessions of the machine): each invocation goes on with the fleet in it, and one that completes the fleet measures it; with a stack of its own, kept between invocations (DEPLOYFLOW_RUN_DIR, bin/devstack down --keep-data); docs/performance.md")
	flag.DurationVar(&scaleCreateFor, "scale-create-for", 0, "scale mode with -scale-state: start no deploy of the fleet after this long (those under way end), save the state and stop if the fleet is not complete; 0: no bound")
	flag.IntVar(&scaleBurst, "scale-burst", scaleBurst, "scale mode: leases changed at once (each one's ReplicaSet scaled to 0 by hand), with every worker, then with one")
	flag.Parse()
	var sizes []int
	for _, f := range strings.Split(*fleetSizes, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: -fleet %q: want comma-separated positive numbers such as 10,100,500\n", *fleetSizes)
			os.Exit(2)
		}
		sizes = append(sizes, n)
	}
	if err := run(int32(*replicas), *readyAfter, *runs, sizes, *idle, *idleFor); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// statefulReplicas and statefulRuns are the StatefulSet comparison's
// replicas (-statefulset-replicas, 0: skipped) and rollouts per driver
// (-statefulset-runs).
var statefulReplicas, statefulRuns = 5, 3

// trafficCanaries is how many canaries the traffic benchmark runs
// (-traffic).
var trafficCanaries = 4

// temporalNamespace is the Temporal namespace of the bench's workflows and
// workers (-temporal-namespace).
var temporalNamespace = "default"

// workerStickyCache is the workers' --sticky-cache-size, the fleet
// benchmark's and the scale mode's (-worker-sticky-cache-size; 0: the
// worker's default): their memory at rest is mostly the workflows it keeps
// (issue 40.2), and a small cache makes most observations reach workflows
// their worker evicted (docs/performance.md).
var workerStickyCache = 0

func run(replicas int32, readyAfter time.Duration, runs int, sizes []int, idle int, idleFor time.Duration) error {
	ctx := context.Background()
	wd, _ := os.Getwd()
	repo, err := devstack.FindRepo(wd)
	if err != nil {
		return err
	}
	s, err := devstack.New(repo, searchattr.Registration())
	if err != nil {
		return err
	}
	if _, err := s.Up(ctx); err != nil {
		return err
	}
	kc, err := kube.NewClientset(s.Kubeconfig(), "", engineAgent)
	if err != nil {
		return err
	}
	tc, err := client.Dial(client.Options{HostPort: devstack.TemporalAddress, Namespace: temporalNamespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer tc.Close()
	rc, err := kube.RESTConfig(s.Kubeconfig(), "", "deployflow-bench")
	if err != nil {
		return err
	}
	// The bench creates the fleets' lease records: at client-go's default
	// 5 a second, make bench-scale's first deploys waited on its own
	// client ("client-side throttling"), 250 records 50 s.
	rc.QPS, rc.Burst = 500, 1000
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	// deployflow's CRDs, as the chart (or the demo) installs them: the
	// worker's informers watch leases, and the worker binary checks them.
	if err := crds.Install(ctx, dyn); err != nil {
		return fmt.Errorf("install deployflow's CRDs: %w", err)
	}
	if scaleLeases > 0 {
		return runScale(ctx, s, tc, dyn)
	}
	if runs > 0 {
		if err := rollouts(ctx, s, kc, tc, replicas, readyAfter, runs); err != nil {
			return err
		}
	}
	if statefulReplicas > 0 && statefulRuns > 0 {
		if err := runStatefulSets(ctx, s, tc, int32(statefulReplicas), readyAfter, statefulRuns); err != nil {
			return fmt.Errorf("StatefulSet comparison: %w", err)
		}
	}
	if trafficCanaries > 0 {
		if err := runTraffic(ctx, out, rc, kc, dyn, tc, trafficCanaries); err != nil {
			return fmt.Errorf("traffic benchmark: %w", err)
		}
	}
	if len(sizes) == 0 {
		return nil
	}
	return runFleet(ctx, s, tc, dyn, sizes, idle, idleFor)
}

// rollouts compares one rollout by deployflow's engine and by the native
// Deployment controller.
func rollouts(ctx context.Context, s *devstack.Stack, kc kubernetes.Interface, tc client.Client, replicas int32, readyAfter time.Duration, runs int) error {
	b := &bench{stack: s, kube: kc, temporal: tc, taskQueue: fmt.Sprintf("bench-%d", time.Now().UnixNano()),
		replicas: replicas, readyAfter: readyAfter}

	w := worker.New(tc, b.taskQueue, worker.Options{})
	// The engine's rollouts act in namespaces the worker lists, as a
	// worker started with --rollout-namespaces bench-engine-0,... would.
	var allowed []string
	for i := 0; i < runs; i++ {
		allowed = append(allowed, fmt.Sprintf("bench-engine-%d", i))
	}
	// The worker binary's shared informer cache, which rollouts wait on.
	rc, err := kube.RESTConfig(s.Kubeconfig(), "", engineAgent)
	if err != nil {
		return err
	}
	cache, stopCache, err := startCache(ctx, rc)
	if err != nil {
		return err
	}
	defer stopCache()
	app.Register(w, &activities.Activities{Kube: kc, RolloutNamespaces: allowed, Observer: cache})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	stopKCM, err := s.StartControllerManager(ctx, "bench-deployment-controller", "deployment-controller", "10260")
	if err != nil {
		return fmt.Errorf("native deployment controller: %w", err)
	}
	defer stopKCM()

	fmt.Fprintf(out, "rollout of %d replicas, maxSurge 25%%, maxUnavailable 25%%, pods ready after %s; %d runs each\n\n",
		replicas, readyAfter, runs)
	var native, engine []result
	for i := 0; i < runs; i++ {
		n, err := b.native(ctx, i)
		if err != nil {
			return fmt.Errorf("native run %d: %w", i, err)
		}
		e, err := b.engine(ctx, i, readyAfter)
		if err != nil {
			return fmt.Errorf("engine run %d: %w", i, err)
		}
		fmt.Fprintf(out, "run %d: native %6s  %3d requests | deployflow %6s  %3d requests  %3d events\n",
			i+1, n.wall.Round(time.Millisecond), n.requests, e.wall.Round(time.Millisecond), e.requests, e.events)
		native, engine = append(native, n), append(engine, e)
	}
	// Waiting must not grow the history: the same single-replica rollout
	// (whose steps cannot vary) with pods ready after 1s and after 5s.
	b.replicas = 1
	quick, err := b.engine(ctx, runs, time.Second)
	if err != nil {
		return fmt.Errorf("engine 1-replica run: %w", err)
	}
	slow, err := b.engine(ctx, runs+1, 5*time.Second)
	if err != nil {
		return fmt.Errorf("engine 1-replica slow run: %w", err)
	}

	mn, me := median(native), median(engine)
	fmt.Fprintf(out, "\n%-28s %12s %12s\n", "median of runs", "native", "deployflow")
	fmt.Fprintf(out, "%-28s %12s %12s\n", "wall time", mn.wall.Round(time.Millisecond), me.wall.Round(time.Millisecond))
	fmt.Fprintf(out, "%-28s %12d %12d\n", "apiserver requests/rollout", mn.requests, me.requests)
	fmt.Fprintf(out, "%-28s %12s %12d\n", "history events/rollout", "-", me.events)
	fmt.Fprintf(out, "\nwall-time ratio deployflow/native: %.3f (target <= 1.05)\n", float64(me.wall)/float64(mn.wall))
	fmt.Fprintf(out, "history events of a 1-replica rollout, pods ready after 1s: %d, after 5s: %d (target: constant in wait time)\n",
		quick.events, slow.events)
	return nil
}

// startCache runs the worker binary's shared informer cache, which
// rollouts wait on, until stop.
func startCache(ctx context.Context, rc *rest.Config) (*observe.Observer, func(), error) {
	cache, err := observe.New(rc, nil, observe.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	go cache.Run(ctx)
	if err := cache.WaitSynced(time.Minute); err != nil {
		stop()
		return nil, nil, err
	}
	return cache, stop, nil
}

func median(rs []result) result {
	pick := func(less func(a, b result) bool) result {
		c := append([]result(nil), rs...)
		sort.Slice(c, func(i, j int) bool { return less(c[i], c[j]) })
		return c[len(c)/2]
	}
	out := pick(func(a, b result) bool { return a.wall < b.wall })
	out.requests = pick(func(a, b result) bool { return a.requests < b.requests }).requests
	out.events = pick(func(a, b result) bool { return a.events < b.events }).events
	return out
}

func (b *bench) deployment(ns, image string, readyAfter time.Duration) *appsv1.Deployment {
	r := b.replicas
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &r,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels,
					Annotations: map[string]string{"deployflow.dev/ready-after": readyAfter.String()}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
			},
		},
	}
}

func (b *bench) namespace(ctx context.Context, name string) error {
	_ = b.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	for i := 0; i < 300; i++ {
		if _, err := b.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	a := &activities.Activities{Kube: b.kube, RolloutNamespaces: []string{name}}
	return a.EnsureNamespace(ctx, activities.EnsureNamespaceInput{Name: name})
}

// native rolls nginx:1.26 → 1.27 with a real Deployment object.
func (b *bench) native(ctx context.Context, i int) (result, error) {
	ns := fmt.Sprintf("bench-native-%d", i)
	if err := b.namespace(ctx, ns); err != nil {
		return result{}, err
	}
	deps := b.kube.AppsV1().Deployments(ns)
	if _, err := deps.Create(ctx, b.deployment(ns, "nginx:1.26", 0), metav1.CreateOptions{}); err != nil {
		return result{}, err
	}
	if err := b.waitDeployment(ctx, ns); err != nil {
		return result{}, err
	}
	start := time.Now()
	d, err := deps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return result{}, err
	}
	d.Spec.Template = b.deployment(ns, "nginx:1.27", b.readyAfter).Spec.Template
	if _, err := deps.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		return result{}, err
	}
	if err := b.waitDeployment(ctx, ns); err != nil {
		return result{}, err
	}
	wall := time.Since(start)
	reqs, err := b.countRequests(ns, nativeAgent, start, time.Now())
	return result{wall: wall, requests: reqs}, err
}

func (b *bench) waitDeployment(ctx context.Context, ns string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		d, err := b.kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration >= d.Generation && rollout.DeploymentComplete(d, &d.Status) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("deployment %s/web not complete after 5 minutes", ns)
}

// engine rolls nginx:1.26 → 1.27 with RolloutWorkflow.
func (b *bench) engine(ctx context.Context, i int, readyAfter time.Duration) (result, error) {
	ns := fmt.Sprintf("bench-engine-%d", i)
	if err := b.namespace(ctx, ns); err != nil {
		return result{}, err
	}
	rollOut := func(image string, readyAfter time.Duration) (client.WorkflowRun, error) {
		run, err := b.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("bench-%s-%s-%d", ns, image, time.Now().UnixNano()), TaskQueue: b.taskQueue,
		}, api.RolloutWorkflow, api.RolloutInput{Namespace: ns, Service: "web",
			Deployment: *b.deployment(ns, image, readyAfter)})
		if err != nil {
			return nil, err
		}
		return run, run.Get(ctx, nil)
	}
	if _, err := rollOut("nginx:1.26", 0); err != nil {
		return result{}, err
	}
	start := time.Now()
	run, err := rollOut("nginx:1.27", readyAfter)
	if err != nil {
		return result{}, err
	}
	wall := time.Since(start)
	reqs, err := b.countRequests(ns, engineAgent, start, time.Now())
	if err != nil {
		return result{}, err
	}
	events := 0
	it := b.temporal.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			return result{}, err
		}
		events++
	}
	return result{wall: wall, requests: reqs, events: events}, nil
}

// countRequests counts audit-log requests in namespace ns whose user agent
// contains agent, received within [from, to].
func (b *bench) countRequests(ns, agent string, from, to time.Time) (int, error) {
	time.Sleep(500 * time.Millisecond) // let the apiserver flush its audit log
	return auditRequests(b.stack.AuditLog(), ns, from, to, func(userAgent, namespace string) bool {
		return namespace == ns && strings.Contains(userAgent, agent)
	})
}

// auditRequests counts the requests of the kube-apiserver's audit log at
// path (one line each) received within [from, to] that match; only lines
// containing hint are parsed.
func auditRequests(path, hint string, from, to time.Time, match func(userAgent, namespace string) bool) (int, error) {
	n := 0
	err := auditEntries(path, hint, from, to, func(e auditEntry) {
		if match(e.UserAgent, e.ObjectRef.Namespace) {
			n++
		}
	})
	return n, err
}

// auditEntry is what make bench reads of one request in the audit log.
type auditEntry struct {
	UserAgent string    `json:"userAgent"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	ObjectRef struct {
		Namespace string `json:"namespace"`
		Resource  string `json:"resource"`
		APIGroup  string `json:"apiGroup"`
	} `json:"objectRef"`
}

// auditEntries calls each with every request of the audit log at path
// received between from and to whose line contains hint.
func auditEntries(path, hint string, from, to time.Time, each func(auditEntry)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(hint)) {
			continue
		}
		var e auditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		if !e.Received.Before(from) && !e.Received.After(to) {
			each(e)
		}
	}
	return sc.Err()
}
