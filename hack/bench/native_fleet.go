package main

// The fleet's other side (issue 22.2): the same number of deploys done by
// the native Deployment controller, in the same run, on the same stack. Each
// deploy is a namespace, a ClusterIP Service and a one-replica Deployment,
// created by a client that does not serialize creation (one goroutine per
// deploy, no client-side rate limit), under a second kube-controller-manager
// that runs only the deployment controller (the stack's own runs the
// ReplicaSet controller for both sides). A deploy's time is from the start
// of its creation to its Deployment being Available, as seen by a watch.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/k8s/kube"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// nativeFleetLabel marks the native side's objects with their batch.
const nativeFleetLabel = "deployflow.dev/bench-native-fleet"

// nativeDeploymentController is the name the bench's second
// kube-controller-manager is recorded under.
const nativeDeploymentController = "bench-fleet-deployment-controller"

type nativeFleet struct {
	kube    kubernetes.Interface
	prefix  string
	batches int
	created []string // namespaces, deleted at the end
}

func newNativeFleet(s *devstack.Stack, prefix string) (*nativeFleet, error) {
	rc, err := kube.RESTConfig(s.Kubeconfig(), "", "deployflow-bench-native")
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = -1, 0 // no client-side limit: creation is not serialized here
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &nativeFleet{kube: kc, prefix: prefix + "n"}, nil
}

// deployAll creates n namespaces, Services and one-replica Deployments at
// once and waits until every Deployment is Available.
func (nf *nativeFleet) deployAll(ctx context.Context, n int) (batch, error) {
	nf.batches++
	id := fmt.Sprintf("%s%d", nf.prefix, nf.batches)
	available := make(chan availability, n)
	factory := informers.NewSharedInformerFactoryWithOptions(nf.kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = nativeFleetLabel + "=" + id }))
	inf := factory.Apps().V1().Deployments().Informer()
	var mu sync.Mutex
	seen := map[string]bool{}
	check := func(obj any) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok || d.Status.ObservedGeneration < d.Generation || !rollout.DeploymentComplete(d, &d.Status) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[d.Namespace] {
			seen[d.Namespace] = true
			available <- availability{namespace: d.Namespace, at: time.Now()}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, o any) { check(o) }}); err != nil {
		return batch{}, err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	factory.Start(wctx.Done())
	factory.WaitForCacheSync(wctx.Done())

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", id, i)
	}
	nf.created = append(nf.created, names...)
	b := batch{start: time.Now(), results: make([]deployResult, n)}
	started := make([]time.Time, n)
	index := map[string]int{}
	var wg sync.WaitGroup
	for i, ns := range names {
		index[ns] = i
		wg.Add(1)
		go func() {
			defer wg.Done()
			started[i] = time.Now()
			b.results[i] = deployResult{lease: ns, err: nf.create(ctx, ns, id)}
		}()
	}
	wg.Wait()
	pending := 0
	for _, r := range b.results {
		if r.err == nil {
			pending++
		}
	}
	timeout := time.After(30 * time.Minute)
	for pending > 0 {
		select {
		case a := <-available:
			i := index[a.namespace]
			b.results[i].took = a.at.Sub(started[i])
			pending--
		case <-timeout:
			return b, fmt.Errorf("native fleet %s: %d Deployments not Available after 30 minutes", id, pending)
		}
	}
	b.end = time.Now()
	return b, nil
}

type availability struct {
	namespace string
	at        time.Time
}

// create makes one native deploy's objects.
func (nf *nativeFleet) create(ctx context.Context, ns, batchID string) error {
	labels := map[string]string{nativeFleetLabel: batchID}
	if _, err := nf.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	app := map[string]string{"app": "web"}
	if _, err := nf.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec:       corev1.ServiceSpec{Selector: app, Ports: []corev1.ServicePort{{Name: "p80", Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	one := int32(1)
	_, err := nf.kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: app},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: app},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27",
					Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}},
			},
		},
	}, metav1.CreateOptions{})
	return err
}

// cleanup deletes the native side's namespaces.
func (nf *nativeFleet) cleanup(ctx context.Context) {
	for _, ns := range nf.created {
		_ = nf.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
}

// timeToAll is how long the whole batch took, start to last Available.
func timeToAll(b batch) time.Duration {
	var last time.Duration
	for _, r := range b.results {
		if r.err == nil && r.took > last {
			last = r.took
		}
	}
	return last
}

// cpuMeter reads the CPU seconds of each of the stack's processes, the
// worker and the native deployment controller, from /proc. PostgreSQL's
// backends are its children, and kube-scheduler and kube-controller-manager
// run under a supervisor that restarts them (devstack): each figure is the
// recorded process's with its children's.
type cpuMeter struct {
	stack  *devstack.Stack
	worker func() int
}

// cpuComponents are the rows of the CPU table, in order.
func (m cpuMeter) components() []string {
	out := []string{devstack.Temporal}
	if m.stack.TemporalMode == devstack.ModePostgres {
		out = append(out, devstack.Postgres)
	}
	return append(out, "worker", devstack.APIServer, devstack.Etcd, devstack.ControllerManager,
		nativeDeploymentController, devstack.Scheduler, devstack.Kwok)
}

func (m cpuMeter) read() map[string]float64 {
	out := map[string]float64{}
	for _, c := range m.components() {
		pid, ok := 0, false
		if c == "worker" {
			pid, ok = m.worker(), m.worker() > 0
		} else {
			pid, ok = m.stack.PID(c)
		}
		if !ok {
			continue
		}
		out[c] = procCPU(pid, true)
		for _, child := range childrenOf(pid) {
			out[c] += procCPU(child, false)
		}
	}
	return out
}

// procCPU is a process's user+system seconds, with its reaped children's
// when withChildren.
func procCPU(pid int, withChildren bool) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	sum := 0.0
	idx := []int{11, 12} // utime, stime
	if withChildren {
		idx = append(idx, 13, 14) // cutime, cstime
	}
	for _, i := range idx {
		v, _ := strconv.ParseFloat(fields[i], 64)
		sum += v
	}
	return sum / 100 // USER_HZ
}

// childrenOf lists the live children of pid.
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, child)
		}
	}
	sort.Ints(out)
	return out
}

func cpuDelta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}
