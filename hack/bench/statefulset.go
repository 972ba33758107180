package main

// The StatefulSet comparison (issue 39.5): one stateful service's image
// update rolled out by the native StatefulSet controller on its own
// (RollingUpdate, partition 0) and by deployflow's StatefulSetRolloutWorkflow
// (the partition lowered a step at a time, the controller replacing the
// pods it releases), side by side: the order in which the pods were
// replaced, the wall time and the kube-apiserver requests of each driver.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/kube"
	"github.com/deployflow/deployflow/worker/app"
)

const (
	// nativeStatefulSetAgent is the suffix kube-controller-manager gives
	// its StatefulSet controller's client (seen in the audit log:
	// kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/$Format/statefulset-controller).
	nativeStatefulSetAgent = "/statefulset-controller"
	// watchAgent is the bench's own client, which watches the pods to
	// record the order of replacement: counted for neither driver.
	watchAgent = "deployflow-bench"
	// statefulService is the benchmarked service (and StatefulSet) name.
	statefulService = "db"
	// statefulParentName is the bench's stand-in for a lease's workflow.
	statefulParentName = "BenchStatefulParent"
)

// stsResult is one StatefulSet rollout's figures.
type stsResult struct {
	wall  time.Duration
	order []int32 // ordinals in the order they first ran the update revision
	// requests are the driver's: the StatefulSet controller's on the
	// native side, deployflow's worker's on the other.
	requests int
	// controller is the StatefulSet controller's requests in deployflow's
	// run (it still replaces the pods the partition releases).
	controller int
	events     int
	// Where the wall time goes: from the write (native) or the start
	// (deployflow) to the first pod seen on the update revision, then
	// between one such pod and the next (the mean), and from the last to
	// the end.
	first, step, tail time.Duration
}

// benchStatefulParent stands in for a lease's workflow: started under the
// lease's workflow ID (api.DeployWorkflowID), it runs the stateful rollout
// as its child, as the lease's chain does (a rollout started by hand is
// refused), and returns the child's run ID.
func benchStatefulParent(ctx workflow.Context, in api.StatefulSetRolloutInput) (string, error) {
	ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: api.RolloutWorkflowID(in.Namespace, in.Service)})
	f := workflow.ExecuteChildWorkflow(ctx, api.StatefulSetRolloutWorkflow, in)
	var ex workflow.Execution
	if err := f.GetChildWorkflowExecution().Get(ctx, &ex); err != nil {
		return "", err
	}
	return ex.RunID, f.Get(ctx, nil)
}

type stsBench struct {
	stack      *devstack.Stack
	kube       kubernetes.Interface // the bench's own (watchAgent)
	temporal   client.Client
	taskQueue  string
	replicas   int32
	readyAfter time.Duration
}

// runStatefulSets rolls a StatefulSet of replicas out runs times each by
// the native StatefulSet controller and by deployflow, and prints the
// table.
func runStatefulSets(ctx context.Context, s *devstack.Stack, tc client.Client, replicas int32, readyAfter time.Duration, runs int) error {
	watch, err := kube.NewClientset(s.Kubeconfig(), "", watchAgent)
	if err != nil {
		return err
	}
	// deployflow's activities get a client of their own, whose user agent
	// the audit log counts.
	engine, err := kube.NewClientset(s.Kubeconfig(), "", engineAgent)
	if err != nil {
		return err
	}
	b := &stsBench{stack: s, kube: watch, temporal: tc, taskQueue: fmt.Sprintf("bench-sts-%d", time.Now().UnixNano()),
		replicas: replicas, readyAfter: readyAfter}
	w := worker.New(tc, b.taskQueue, worker.Options{})
	app.Register(w, &activities.Activities{Kube: engine})
	w.RegisterWorkflowWithOptions(benchStatefulParent, workflow.RegisterOptions{Name: statefulParentName})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	defer b.dropNamespaces(ctx, runs)

	fmt.Fprintf(out, "\nStatefulSet rollout of %d replicas (OrderedReady, a 1Gi claim each), nginx:1.26 → 1.27, pods ready after %s; %d runs each\n\n",
		replicas, readyAfter, runs)
	var native, engineRuns []stsResult
	for i := 0; i < runs; i++ {
		n, err := b.native(ctx, i)
		if err != nil {
			return fmt.Errorf("native StatefulSet run %d: %w", i, err)
		}
		e, err := b.deployflow(ctx, i)
		if err != nil {
			return fmt.Errorf("deployflow StatefulSet run %d: %w", i, err)
		}
		fmt.Fprintf(out, "run %d: native %s %7s %3d requests | deployflow %s %7s %3d requests (+%d controller) %3d events\n",
			i+1, formatOrder(n.order), n.wall.Round(time.Millisecond), n.requests,
			formatOrder(e.order), e.wall.Round(time.Millisecond), e.requests, e.controller, e.events)
		native, engineRuns = append(native, n), append(engineRuns, e)
	}
	printStatefulTable(replicas, stsMedian(native), stsMedian(engineRuns), commonOrder(native), commonOrder(engineRuns))
	return nil
}

// printStatefulTable prints the two rows, medians of the runs; an order
// is "" when the runs' orders differ.
func printStatefulTable(replicas int32, n, e stsResult, nOrder, eOrder []int32) {
	show := func(o []int32) string {
		if o == nil {
			return "varies"
		}
		return formatOrder(o)
	}
	fmt.Fprintf(out, "\n%-30s %8s %-16s %10s %8s %10s %10s %8s\n", "median of runs", "replicas", "order", "wall time", "ratio", "requests", "+ sts ctl", "events")
	fmt.Fprintf(out, "%-30s %8d %-16s %10s %8.3f %10d %10s %8s\n", "native StatefulSet controller", replicas, show(nOrder),
		n.wall.Round(time.Millisecond), 1.0, n.requests, "-", "-")
	fmt.Fprintf(out, "%-30s %8d %-16s %10s %8.3f %10d %10d %8d\n", "deployflow (partition steps)", replicas, show(eOrder),
		e.wall.Round(time.Millisecond), float64(e.wall)/float64(n.wall), e.requests, e.controller, e.events)
	same := "the same"
	if nOrder == nil || eOrder == nil || !slices.Equal(nOrder, eOrder) {
		same = "DIFFERENT"
	}
	fmt.Fprintf(out, "\norder of replacement: %s (highest ordinal down: native %t, deployflow %t)\n", same,
		highestFirst(nOrder, replicas), highestFirst(eOrder, replicas))
	fmt.Fprintf(out, "wall-time ratio deployflow/native: %.3f (target within 5%%)\n", float64(e.wall)/float64(n.wall))
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	fmt.Fprintf(out, "where it goes (native | deployflow): to the first pod replaced %s | %s, then one every %s | %s, last one to the end %s | %s\n",
		ms(n.first), ms(e.first), ms(n.step), ms(e.step), ms(n.tail), ms(e.tail))
	fmt.Fprintf(out, "requests: the driver's in the StatefulSet's namespace (native: %s; deployflow: its worker, %s), counted from the audit log;\n"+
		"+ sts ctl: the StatefulSet controller's in deployflow's run, which still replaces the pods the partition releases\n",
		nativeStatefulSetAgent, engineAgent)
}

// formatOrder is an order of replacement as printed: "4>3>2>1>0".
func formatOrder(order []int32) string {
	if len(order) == 0 {
		return "-"
	}
	parts := make([]string, len(order))
	for i, o := range order {
		parts[i] = strconv.Itoa(int(o))
	}
	return strings.Join(parts, ">")
}

// highestFirst is whether order replaced every one of replicas ordinals,
// from the highest down.
func highestFirst(order []int32, replicas int32) bool {
	if int32(len(order)) != replicas {
		return false
	}
	for i, o := range order {
		if o != replicas-1-int32(i) {
			return false
		}
	}
	return true
}

// commonOrder is the runs' order of replacement if they all agree, else
// nil.
func commonOrder(rs []stsResult) []int32 {
	if len(rs) == 0 {
		return nil
	}
	for _, r := range rs[1:] {
		if !slices.Equal(r.order, rs[0].order) {
			return nil
		}
	}
	return rs[0].order
}

// stsMedian is each figure's median over the runs.
func stsMedian(rs []stsResult) stsResult {
	mid := func(key func(stsResult) int64) int64 {
		v := make([]int64, len(rs))
		for i, r := range rs {
			v[i] = key(r)
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return v[len(v)/2]
	}
	return stsResult{
		wall:       time.Duration(mid(func(r stsResult) int64 { return int64(r.wall) })),
		requests:   int(mid(func(r stsResult) int64 { return int64(r.requests) })),
		controller: int(mid(func(r stsResult) int64 { return int64(r.controller) })),
		events:     int(mid(func(r stsResult) int64 { return int64(r.events) })),
		first:      time.Duration(mid(func(r stsResult) int64 { return int64(r.first) })),
		step:       time.Duration(mid(func(r stsResult) int64 { return int64(r.step) })),
		tail:       time.Duration(mid(func(r stsResult) int64 { return int64(r.tail) })),
	}
}

// podRevision is a pod's ordinal and the revision it ran when first
// seen, and when.
type podRevision struct {
	ordinal  int32
	revision string
	at       time.Time
}

// replacementOrder is the ordinals in the order they were first seen on
// revision, each once, and when each was.
func replacementOrder(seen []podRevision, revision string) ([]int32, []time.Time) {
	var order []int32
	var at []time.Time
	for _, p := range seen {
		if p.revision == revision && !slices.Contains(order, p.ordinal) {
			order, at = append(order, p.ordinal), append(at, p.at)
		}
	}
	return order, at
}

// timeline fills r's order and where its time went, from the pods seen on
// revision between start and end.
func (r *stsResult) timeline(seen []podRevision, revision string, start, end time.Time) {
	var at []time.Time
	r.order, at = replacementOrder(seen, revision)
	r.wall = end.Sub(start)
	if len(at) == 0 {
		return
	}
	r.first, r.tail = at[0].Sub(start), end.Sub(at[len(at)-1])
	if len(at) > 1 {
		r.step = at[len(at)-1].Sub(at[0]) / time.Duration(len(at)-1)
	}
}

// statefulSet is the benchmarked StatefulSet of lease, as its manifest
// renders it (a persistent volume on the stack's StorageClass, pods Ready
// readyAfter after they start).
func (b *stsBench) statefulSet(lease, image string) (*appsv1.StatefulSet, error) {
	r := b.replicas
	m := manifest.Manifest{Lease: lease, Services: []manifest.Service{{Name: statefulService, Image: image, Replicas: &r,
		Ports:          []manifest.Port{{Port: 80}},
		PodAnnotations: map[string]string{"deployflow.dev/ready-after": b.readyAfter.String()},
		Volumes: []manifest.Volume{{Name: "data", Size: "1Gi", MountPath: "/data", Persistent: true,
			Class: devstack.StorageClass}}}}}
	return m.WithDefaults().StatefulSet(statefulService)
}

// freshNamespace deletes namespace ns if it is there, waits until it is
// gone, and creates it.
func (b *stsBench) freshNamespace(ctx context.Context, ns string) error {
	nss := b.kube.CoreV1().Namespaces()
	_ = nss.Delete(ctx, ns, metav1.DeleteOptions{})
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, err := nss.Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s still there after 3 minutes", ns)
		}
		time.Sleep(200 * time.Millisecond)
	}
	_, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return err
}

// native creates the StatefulSet with RollingUpdate at partition 0, waits
// until it is rolled out, then changes its image and times the
// controller's own rolling update, from the write to every pod updated
// and Ready.
func (b *stsBench) native(ctx context.Context, i int) (stsResult, error) {
	lease := fmt.Sprintf("bench-sts-native-%d", i)
	ns := manifest.Namespace(lease)
	if err := b.freshNamespace(ctx, ns); err != nil {
		return stsResult{}, err
	}
	sts, err := b.statefulSet(lease, "nginx:1.26")
	if err != nil {
		return stsResult{}, err
	}
	zero := int32(0)
	sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &zero}}
	sets := b.kube.AppsV1().StatefulSets(ns)
	created, err := sets.Create(ctx, sts, metav1.CreateOptions{})
	if err != nil {
		return stsResult{}, err
	}
	rec, err := b.record(ctx, ns)
	if err != nil {
		return stsResult{}, err
	}
	defer rec.stop()
	if _, err := rec.rolledOut(ctx, created.Generation, 5*time.Minute); err != nil {
		return stsResult{}, fmt.Errorf("first rollout: %w", err)
	}
	next, err := b.statefulSet(lease, "nginx:1.27")
	if err != nil {
		return stsResult{}, err
	}
	start := time.Now()
	live, err := sets.Get(ctx, statefulService, metav1.GetOptions{})
	if err != nil {
		return stsResult{}, err
	}
	live.Spec.Template = next.Spec.Template
	updated, err := sets.Update(ctx, live, metav1.UpdateOptions{})
	if err != nil {
		return stsResult{}, err
	}
	done, err := rec.rolledOut(ctx, updated.Generation, 5*time.Minute)
	if err != nil {
		return stsResult{}, err
	}
	var res stsResult
	res.timeline(rec.seenPods(), done.revision, start, done.at)
	res.requests, err = countIn(b.stack, ns, nativeStatefulSetAgent, start, done.at)
	return res, err
}

// deployflow deploys the StatefulSet with StatefulSetRolloutWorkflow (a
// child of the lease's workflow), then rolls the new image out the same
// way, timed from the start of the lease's workflow to its end.
func (b *stsBench) deployflow(ctx context.Context, i int) (stsResult, error) {
	lease := fmt.Sprintf("bench-sts-deployflow-%d", i)
	ns := manifest.Namespace(lease)
	if err := b.freshNamespace(ctx, ns); err != nil {
		return stsResult{}, err
	}
	rec, err := b.record(ctx, ns)
	if err != nil {
		return stsResult{}, err
	}
	defer rec.stop()
	rollOut := func(image string) (string, error) {
		sts, err := b.statefulSet(lease, image)
		if err != nil {
			return "", err
		}
		run, err := b.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: api.DeployWorkflowID(lease), TaskQueue: b.taskQueue},
			statefulParentName, api.StatefulSetRolloutInput{Namespace: ns, Service: statefulService, StatefulSet: *sts})
		if err != nil {
			return "", err
		}
		var runID string
		return runID, run.Get(ctx, &runID)
	}
	if _, err := rollOut("nginx:1.26"); err != nil {
		return stsResult{}, fmt.Errorf("first rollout: %w", err)
	}
	start := time.Now()
	runID, err := rollOut("nginx:1.27")
	if err != nil {
		return stsResult{}, err
	}
	end := time.Now()
	live, err := b.kube.AppsV1().StatefulSets(ns).Get(ctx, statefulService, metav1.GetOptions{})
	if err != nil {
		return stsResult{}, err
	}
	var res stsResult
	res.timeline(rec.seenPods(), live.Status.UpdateRevision, start, end)
	if res.requests, err = countIn(b.stack, ns, engineAgent, start, end); err != nil {
		return stsResult{}, err
	}
	if res.controller, err = auditRequests(b.stack.AuditLog(), ns, start, end, func(userAgent, namespace string) bool {
		return namespace == ns && strings.Contains(userAgent, nativeStatefulSetAgent)
	}); err != nil {
		return stsResult{}, err
	}
	it := b.temporal.GetWorkflowHistory(ctx, api.RolloutWorkflowID(ns, statefulService), runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			return stsResult{}, err
		}
		res.events++
	}
	return res, nil
}

// dropNamespaces deletes the runs' namespaces (their claims and volumes
// with them) once every run is done, so that no run shares the cluster
// with another's teardown, and waits until they are gone: the next
// benchmark does not share it either.
func (b *stsBench) dropNamespaces(ctx context.Context, runs int) {
	var names []string
	for i := 0; i < runs; i++ {
		for _, side := range []string{"native", "deployflow"} {
			names = append(names, manifest.Namespace(fmt.Sprintf("bench-sts-%s-%d", side, i)))
		}
	}
	for _, ns := range names {
		_ = b.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		left := 0
		for _, ns := range names {
			if _, err := b.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left++
			}
		}
		if left == 0 {
			return
		}
	}
}

// countIn counts the audit log's requests in namespace ns whose user agent
// contains agent, received within [from, to].
func countIn(s *devstack.Stack, ns, agent string, from, to time.Time) (int, error) {
	time.Sleep(500 * time.Millisecond) // let the apiserver flush its audit log
	return auditRequests(s.AuditLog(), ns, from, to, func(userAgent, namespace string) bool {
		return namespace == ns && strings.Contains(userAgent, agent)
	})
}

// recorder watches a namespace's StatefulSet and pods: the pods' ordinals
// and revisions in the order first seen, and when the StatefulSet was
// first seen rolled out at each observed generation.
type recorder struct {
	stop func()

	mu   sync.Mutex
	seen []podRevision
	done map[int64]rolledOut // by status.observedGeneration
}

type rolledOut struct {
	at       time.Time
	revision string
}

// record starts a recorder of namespace ns.
func (b *stsBench) record(ctx context.Context, ns string) (*recorder, error) {
	ctx, cancel := context.WithCancel(ctx)
	rec := &recorder{stop: cancel, done: map[int64]rolledOut{}}
	f := informers.NewSharedInformerFactoryWithOptions(b.kube, 0, informers.WithNamespace(ns))
	pods := f.Core().V1().Pods().Informer()
	sets := f.Apps().V1().StatefulSets().Informer()
	onPod := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.DeletionTimestamp != nil {
			return
		}
		suffix, found := strings.CutPrefix(p.Name, statefulService+"-")
		n, err := strconv.ParseInt(suffix, 10, 32)
		rev := p.Labels[appsv1.ControllerRevisionHashLabelKey]
		if !found || err != nil || rev == "" {
			return
		}
		now := time.Now()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if !slices.ContainsFunc(rec.seen, func(s podRevision) bool { return s.ordinal == int32(n) && s.revision == rev }) {
			rec.seen = append(rec.seen, podRevision{ordinal: int32(n), revision: rev, at: now})
		}
	}
	onSet := func(obj any) {
		s, ok := obj.(*appsv1.StatefulSet)
		if !ok || s.Name != statefulService || s.Spec.Replicas == nil {
			return
		}
		n, st := *s.Spec.Replicas, s.Status
		if st.UpdatedReplicas != n || st.ReadyReplicas != n || st.Replicas != n || st.CurrentRevision != st.UpdateRevision {
			return
		}
		now := time.Now()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if _, ok := rec.done[st.ObservedGeneration]; !ok {
			rec.done[st.ObservedGeneration] = rolledOut{at: now, revision: st.UpdateRevision}
		}
	}
	for _, inf := range []struct {
		i  cache.SharedIndexInformer
		on func(any)
	}{{pods, onPod}, {sets, onSet}} {
		on := inf.on
		if _, err := inf.i.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: on, UpdateFunc: func(_, obj any) { on(obj) }}); err != nil {
			cancel()
			return nil, err
		}
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("watch %s in %s: not synced", typ, ns)
		}
	}
	return rec, nil
}

// seenPods is what the recorder saw so far.
func (r *recorder) seenPods() []podRevision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// rolledOut waits until the StatefulSet was seen rolled out at generation
// gen or later.
func (r *recorder) rolledOut(ctx context.Context, gen int64, timeout time.Duration) (rolledOut, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		var best rolledOut
		for g, d := range r.done {
			if g >= gen && (best.at.IsZero() || d.at.Before(best.at)) {
				best = d
			}
		}
		r.mu.Unlock()
		if !best.at.IsZero() {
			return best, nil
		}
		select {
		case <-ctx.Done():
			return rolledOut{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return rolledOut{}, fmt.Errorf("statefulset %s not rolled out at generation %d after %s", statefulService, gen, timeout)
}
