package main

// The traffic benchmark (issue 38.5): canaries by route weight through the
// stack's Gateway (Traefik) and data plane, under a steady stream of
// requests. For each weight step it reports the share of answers from the
// new version, how long after the rollout wrote the weight the answers
// showed it, and failed requests; for an abort, how long until every
// answer came from the stable version again; for a blue-green switch, how
// long after the route moved the answers all came from the new version,
// and failed requests.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/app"
)

// trafficWeights are each canary's steps (each followed by a pause until
// the bench promotes it), then 100.
var trafficWeights = []int32{25, 50, 75}

// trafficSample is one request of the stream: when it was sent, and the
// image that answered ("" failed).
type trafficSample struct {
	at    time.Time
	image string
}

type trafficStream struct {
	mu      sync.Mutex
	samples []trafficSample
}

func (s *trafficStream) run(ctx context.Context, host string) {
	httpc := &http.Client{Timeout: 5 * time.Second}
	for ctx.Err() == nil {
		at := time.Now()
		image := ""
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+devstack.GatewayAddress+"/", nil)
		req.Host = host
		if resp, err := httpc.Do(req); err == nil {
			if resp.StatusCode == http.StatusOK {
				image = resp.Header.Get(devstack.HeaderImage)
			}
			resp.Body.Close()
		} else if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.samples = append(s.samples, trafficSample{at: at, image: image})
		s.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
}

// since are the samples sent at or after t.
func (s *trafficStream) since(t time.Time) []trafficSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.samples), func(i int) bool { return !s.samples[i].at.Before(t) })
	return append([]trafficSample(nil), s.samples[i:]...)
}

// servedAt is the first sample from which window samples in a row show
// weight percent from image (within 10 points), none failing.
func servedAt(samples []trafficSample, image string, weight int32, window int) (time.Time, bool) {
	for i := 0; i+window <= len(samples); i++ {
		n, failed := 0, false
		for _, s := range samples[i : i+window] {
			failed = failed || s.image == ""
			if s.image == image {
				n++
			}
		}
		share := int32(100 * n / window)
		if !failed && share >= weight-10 && share <= weight+10 {
			return samples[i].at, true
		}
	}
	return time.Time{}, false
}

type trafficRow struct {
	weight  int32
	share   float64
	n       int
	serving time.Duration
}

func runTraffic(ctx context.Context, out io.Writer, rc *rest.Config, kc kubernetes.Interface, dyn dynamic.Interface, tc client.Client, canaries int) error {
	if on, why := devstack.DataPlaneOn(ctx); !on {
		return fmt.Errorf("the traffic benchmark needs the stack's data plane (%s)", why)
	}
	gw := manifest.GatewayRef{Namespace: devstack.GatewayNamespace, Name: devstack.GatewayName, Section: devstack.GatewayListener}
	tq := fmt.Sprintf("bench-traffic-%d", time.Now().UnixNano())
	var allowed []string
	for i := 0; i <= canaries; i++ {
		allowed = append(allowed, fmt.Sprintf("bench-traffic-%d", i))
	}
	allowed = append(allowed, "bench-traffic-bg")
	cache, stopCache, err := startCache(ctx, rc)
	if err != nil {
		return err
	}
	defer stopCache()
	w := worker.New(tc, tq, worker.Options{})
	app.Register(w, &activities.Activities{Kube: kc, RolloutNamespaces: allowed, Observer: cache,
		Gateway: &activities.GatewayRouting{Ref: gw, Dynamic: dyn}})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	fmt.Fprintf(out, "\ncanary through the Gateway: 4 replicas, setWeight %v then 100, a request every 2ms; %d canaries, the last aborted at %d%%\n\n",
		trafficWeights, canaries, trafficWeights[1])
	var rows []trafficRow
	var servings []time.Duration
	failed, total := 0, 0
	var abortToStable time.Duration
	for i := 0; i < canaries; i++ {
		abort := i == canaries-1
		r, f, n, a, err := trafficCanary(ctx, kc, dyn, tc, tq, fmt.Sprintf("bench-traffic-%d", i), gw, abort)
		if err != nil {
			return fmt.Errorf("canary %d: %w", i, err)
		}
		rows = append(rows, r...)
		for _, row := range r {
			servings = append(servings, row.serving)
		}
		failed, total = failed+f, total+n
		if abort {
			abortToStable = a
		}
	}
	fmt.Fprintf(out, "%-8s %14s %10s %22s\n", "weight", "canary share", "requests", "write to serving")
	for _, r := range rows {
		fmt.Fprintf(out, "%-8s %13.1f%% %10d %22s\n", fmt.Sprintf("%d%%", r.weight), r.share, r.n, r.serving.Round(time.Millisecond))
	}
	sort.Slice(servings, func(i, j int) bool { return servings[i] < servings[j] })
	p99 := servings[min(len(servings)-1, len(servings)*99/100)]
	worst := 0.0
	for _, r := range rows {
		worst = max(worst, abs(r.share-float64(r.weight)))
	}
	fmt.Fprintf(out, "\nshare vs weight: worst %.1f points (target within 5 over 500 requests)\n", worst)
	fmt.Fprintf(out, "weight write to serving: p50 %s, p99 %s over %d changes (target p99 < 1s)\n",
		servings[len(servings)/2].Round(time.Millisecond), p99.Round(time.Millisecond), len(servings))
	fmt.Fprintf(out, "failed requests: %d of %d (target 0)\n", failed, total)
	fmt.Fprintf(out, "abort to every request on stable: %s (target < 2s)\n", abortToStable.Round(time.Millisecond))

	// A blue-green switch, by the route's backends, under the stream.
	serving, bgFailed, bgTotal, err := trafficBlueGreen(ctx, kc, dyn, tc, tq, "bench-traffic-bg", gw)
	if err != nil {
		return fmt.Errorf("blue-green: %w", err)
	}
	fmt.Fprintf(out, "\nblue-green through the Gateway: 4 replicas, promoted after 1s, a request every 2ms\n")
	fmt.Fprintf(out, "switch write to serving: %s; failed requests: %d of %d (target 0)\n", serving.Round(time.Millisecond), bgFailed, bgTotal)
	return nil
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// benchDeployment is the traffic benchmark's service web in ns: 4
// replicas of image, port 80.
func benchDeployment(ns, image string) appsv1.Deployment {
	r := int32(4)
	labels := map[string]string{"app": "web"}
	return appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: &r, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image, Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}},
	}}
}

// trafficCanary runs one canary in ns: 1.26 rolled out, then 1.27 through
// the weights, promoted to 100 (or, if abort, aborted at the second
// weight). It returns a row per weight, the failed and total requests, and
// for an abort the time from the abort to the last answer from the canary.
func trafficCanary(ctx context.Context, kc kubernetes.Interface, dyn dynamic.Interface, tc client.Client, tq, ns string,
	gw manifest.GatewayRef, abort bool) ([]trafficRow, int, int, time.Duration, error) {
	b := &bench{kube: kc}
	if err := b.namespace(ctx, ns); err != nil {
		return nil, 0, 0, 0, err
	}
	host := ns + ".bench.example.com"
	deployment := func(image string) appsv1.Deployment { return benchDeployment(ns, image) }
	start := func(in api.RolloutInput) (client.WorkflowRun, error) {
		return tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: api.RolloutWorkflowID(ns, "web"), TaskQueue: tq}, api.RolloutWorkflow, in)
	}
	run, err := start(api.RolloutInput{Namespace: ns, Service: "web", Deployment: deployment("nginx:1.26")})
	if err == nil {
		err = run.Get(ctx, nil)
	}
	if err != nil {
		return nil, 0, 0, 0, err
	}
	// The lease's objects, as ApplyObjects renders them with --routing
	// gateway for a canary with a hostname.
	m := manifest.Manifest{Lease: "bench", Services: []manifest.Service{{Name: "web", Image: "nginx:1.26",
		Ports:   []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{host}}}}},
		Rollout: &manifest.Rollout{Strategy: manifest.StrategyCanary, Steps: []manifest.CanaryStep{{Pause: &manifest.Pause{}}}}}}}
	route, routes, err := trafficObjects(ctx, kc, dyn, ns, m.TrafficServices(), m.HTTPRoutes(gw, nil)[0])
	if err != nil {
		return nil, 0, 0, 0, err
	}
	// The first rollout's end, as the rollout leaves it: both Services
	// on the running version, weight 0 on the canary.
	a := &activities.Activities{Kube: kc, Gateway: &activities.GatewayRouting{Ref: gw, Dynamic: dyn}}
	rs, err := kc.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(rs.Items) != 1 {
		return nil, 0, 0, 0, fmt.Errorf("the first version's ReplicaSet: %v (%d)", err, len(rs.Items))
	}
	old := rs.Items[0].Labels[manifest.PodTemplateHashLabel]
	if _, err := a.SetTraffic(ctx, activities.TrafficInput{Namespace: ns, Service: "web", Routes: []string{route.Name}, StableHash: old, CanaryHash: old}); err != nil {
		return nil, 0, 0, 0, err
	}

	if err := warmUp(ctx, host, "nginx:1.26"); err != nil {
		return nil, 0, 0, 0, err
	}

	stream := &trafficStream{}
	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	go stream.run(streamCtx, host)
	began := time.Now()

	var steps []manifest.CanaryStep
	for _, w := range trafficWeights {
		steps = append(steps, manifest.CanaryStep{SetWeight: &w}, manifest.CanaryStep{Pause: &manifest.Pause{}})
	}
	run, err = start(api.RolloutInput{Namespace: ns, Service: "web", Deployment: deployment("nginx:1.27"), Steps: steps,
		TrafficRoutes: []string{route.Name}, ScaleDownDelaySeconds: 1})
	if err != nil {
		return nil, 0, 0, 0, err
	}
	update := func(name string, args ...any) error {
		h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: run.GetID(), UpdateName: name, Args: args,
			WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		return err
	}
	var rows []trafficRow
	var abortedAt time.Time
	for i, w := range trafficWeights {
		written, err := waitWeight(ctx, routes, route.Name, w)
		if err != nil {
			return nil, 0, 0, 0, err
		}
		// 500 requests once the answers show the weight.
		var served time.Time
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			samples := stream.since(written)
			if at, ok := servedAt(samples, "nginx:1.27", w, 40); ok && len(stream.since(at)) >= 500 {
				served = at
				break
			}
			if time.Now().After(deadline) {
				return nil, 0, 0, 0, fmt.Errorf("weight %d%%: the answers never showed it", w)
			}
		}
		measured := stream.since(served)[:500]
		n := 0
		for _, s := range measured {
			if s.image == "nginx:1.27" {
				n++
			}
		}
		rows = append(rows, trafficRow{weight: w, share: 100 * float64(n) / 500, n: 500, serving: served.Sub(written)})
		if abort && i == 1 {
			abortedAt = time.Now()
			if err := update(api.UpdateAbort); err != nil {
				return nil, 0, 0, 0, err
			}
			break
		}
		if err := update(api.UpdatePromote, api.PromoteRequest{}); err != nil {
			return nil, 0, 0, 0, err
		}
	}
	_ = run.Get(ctx, nil) // an aborted rollout fails, as it should
	time.Sleep(500 * time.Millisecond)
	stopStream()
	all := stream.since(began)
	failed := 0
	lastCanary := abortedAt
	for _, s := range all {
		if s.image == "" {
			failed++
		}
		if !abortedAt.IsZero() && s.image == "nginx:1.27" && s.at.After(lastCanary) {
			lastCanary = s.at
		}
	}
	var toStable time.Duration
	if !abortedAt.IsZero() {
		toStable = lastCanary.Sub(abortedAt)
	}
	return rows, failed, len(all), toStable, nil
}

// trafficObjects creates a lease's Services (svcs) and its route in ns,
// as ApplyObjects renders them with --routing gateway.
func trafficObjects(ctx context.Context, kc kubernetes.Interface, dyn dynamic.Interface, ns string, svcs []*corev1.Service,
	route *gatewayv1.HTTPRoute) (*gatewayv1.HTTPRoute, dynamic.ResourceInterface, error) {
	for _, svc := range svcs {
		svc.Namespace = ns
		if _, err := kc.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return nil, nil, err
		}
	}
	route.Namespace = ns
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(route)
	if err != nil {
		return nil, nil, err
	}
	routes := dyn.Resource(activities.HTTPRouteResource).Namespace(ns)
	if _, err := routes.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		return nil, nil, err
	}
	return route, routes, nil
}

// warmUp waits until the Gateway serves host from image: a route new to
// the Gateway is served moments after its acceptance (a lease's is, long
// before its next rollout), so a stream starts once 20 requests in a row
// are answered.
func warmUp(ctx context.Context, host, image string) error {
	warm := &trafficStream{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		warmCtx, stop := context.WithTimeout(ctx, 200*time.Millisecond)
		warm.run(warmCtx, host)
		stop()
		ok := len(warm.samples) >= 20
		for _, s := range warm.samples {
			ok = ok && s.image == image
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Gateway never served %s from %s", host, image)
		}
		warm.samples = nil
	}
}

// trafficBlueGreen runs one blue-green switch in ns through the Gateway
// under the stream: 1.26 rolled out, then 1.27 previewed and promoted
// (automatically after 1s), its switch a change of the route's backends.
// It returns the time from the route's move to the preview to the
// answers all from 1.27, and the failed and total requests.
func trafficBlueGreen(ctx context.Context, kc kubernetes.Interface, dyn dynamic.Interface, tc client.Client, tq, ns string,
	gw manifest.GatewayRef) (time.Duration, int, int, error) {
	b := &bench{kube: kc}
	if err := b.namespace(ctx, ns); err != nil {
		return 0, 0, 0, err
	}
	host := ns + ".bench.example.com"
	delay := int32(1)
	bg := &manifest.BlueGreen{AutoPromotionSeconds: 1, ScaleDownDelaySeconds: &delay}
	m := manifest.Manifest{Lease: "bench", Services: []manifest.Service{{Name: "web", Image: "nginx:1.26",
		Ports:   []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{host}}}}},
		Rollout: &manifest.Rollout{Strategy: manifest.StrategyBlueGreen, BlueGreen: bg}}}}
	route, routes, err := trafficObjects(ctx, kc, dyn, ns, m.ClusterIPServices(), m.HTTPRoutes(gw, nil)[0])
	if err != nil {
		return 0, 0, 0, err
	}
	rollOut := func(image string) error {
		run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: api.RolloutWorkflowID(ns, "web"), TaskQueue: tq}, api.RolloutWorkflow,
			api.RolloutInput{Namespace: ns, Service: "web", Deployment: benchDeployment(ns, image), BlueGreen: bg, TrafficRoutes: []string{route.Name}})
		if err == nil {
			err = run.Get(ctx, nil)
		}
		return err
	}
	if err := rollOut("nginx:1.26"); err != nil {
		return 0, 0, 0, err
	}
	if err := warmUp(ctx, host, "nginx:1.26"); err != nil {
		return 0, 0, 0, err
	}
	stream := &trafficStream{}
	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	go stream.run(streamCtx, host)
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- rollOut("nginx:1.27") }()
	written, err := waitWeight(ctx, routes, route.Name, 100)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := <-done; err != nil {
		return 0, 0, 0, err
	}
	time.Sleep(500 * time.Millisecond)
	stopStream()
	served, ok := servedAt(stream.since(written), "nginx:1.27", 100, 40)
	if !ok {
		return 0, 0, 0, fmt.Errorf("the switch was never served")
	}
	all := stream.since(began)
	failed := 0
	for _, s := range all {
		if s.image == "" {
			failed++
		}
	}
	return served.Sub(written), failed, len(all), nil
}

// waitWeight waits until the route sends weight percent to the canary
// and returns when that was first seen (the rollout's write, within the
// 10ms poll).
func waitWeight(ctx context.Context, routes dynamic.ResourceInterface, name string, weight int32) (time.Time, error) {
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r, err := routes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return time.Time{}, err
		}
		rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
		if len(rules) == 1 {
			refs, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "backendRefs")
			if len(refs) == 2 {
				if w, _, _ := unstructured.NestedInt64(refs[1].(map[string]any), "weight"); w == int64(weight) {
					return time.Now(), nil
				}
			}
		}
	}
	return time.Time{}, fmt.Errorf("route %s never weighed %d%% to the canary", name, weight)
}
