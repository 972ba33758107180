//go:build chaos

package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/testenv"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/workflows"
)

// The fault-injection suite (issue 13), `make chaos`: for each scenario, a
// probe run without a fault finds the deploy's step boundaries (each
// completion in the histories of the lease's workflow and its rollouts);
// then one run per (fault, boundary) injects the fault right after that
// boundary and checks the invariants on what the deploy touched.
//
// DEPLOYFLOW_CHAOS_SEED fixes the random choices (restart delays; with
// DEPLOYFLOW_CHAOS_BOUNDARIES=one, the one boundary per fault); the seed is
// printed. DEPLOYFLOW_CHAOS_REPORT names the report file.

// chaosRun is one run's harness: a lease, its workers, what is sampled.
type chaosRun struct {
	t       *testing.T
	env     *testenv.Env
	tq      string
	lease   string
	workers []*workerProcess
	rng     *rand.Rand
}

// scenario is a deploy the suite breaks.
type scenario struct {
	name string
	// setup deploys what the scenario starts from (and waits for it).
	setup func(r *chaosRun)
	// run starts the deploy under test.
	run func(r *chaosRun)
	// phase and revision are how it must end.
	phase    string
	revision int64
	// floor is the fewest available web pods allowed while it runs (for a
	// RollingUpdate: replicas - maxUnavailable); ceiling the most pods.
	floor, ceiling int32
	// after checks what else must hold at the end.
	after func(r *chaosRun) []string
}

// fault is one way to break a run right after a boundary.
type fault struct {
	name    string
	workers int // workers the run starts with
	inject  func(r *chaosRun)
}

const chaosHost = ".chaos.example.com"

func webManifest(lease, image string, rollout *manifest.Rollout, never bool) manifest.Manifest {
	four, two := int32(4), int32(2)
	web := manifest.Service{Name: "web", Image: image, Replicas: &four, Rollout: rollout,
		PodAnnotations: map[string]string{"deployflow.dev/ready-after": "1s"},
		Ports:          []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{lease + chaosHost}}}}}}
	if never {
		web.PodLabels = map[string]string{"deployflow.dev/never-ready": "true"}
	}
	return manifest.Manifest{Lease: lease, Services: []manifest.Service{web,
		{Name: "api", Image: "ghcr.io/acme/api:1.0", Replicas: &two, Ports: []manifest.Port{{Port: 8080, Expose: &manifest.Expose{IP: "public"}}}}}}
}

func rolling() *manifest.Rollout {
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	return &manifest.Rollout{MaxSurge: &one, MaxUnavailable: &zero}
}

func scenarios() []scenario {
	deployed := func(image string, ro func() *manifest.Rollout) func(r *chaosRun) {
		return func(r *chaosRun) {
			r.deploy(webManifest(r.lease, image, ro(), false))
			r.waitPhase(workflows.PhaseActive, 1)
		}
	}
	none := func(*chaosRun) {}
	deadline := int32(6)
	return []scenario{
		{name: "first deploy", setup: none, run: func(r *chaosRun) { r.deploy(webManifest(r.lease, "nginx:1.26", rolling(), false)) },
			phase: workflows.PhaseActive, revision: 1, floor: 0, ceiling: 5},
		{name: "rolling update", setup: deployed("nginx:1.26", rolling),
			run:   func(r *chaosRun) { r.deploy(webManifest(r.lease, "nginx:1.27", rolling(), false)) },
			phase: workflows.PhaseActive, revision: 2, floor: 4, ceiling: 5},
		{name: "recreate", setup: deployed("nginx:1.26", func() *manifest.Rollout { return &manifest.Rollout{Strategy: manifest.StrategyRecreate} }),
			run: func(r *chaosRun) {
				r.deploy(webManifest(r.lease, "nginx:1.27", &manifest.Rollout{Strategy: manifest.StrategyRecreate}, false))
			},
			phase: workflows.PhaseActive, revision: 2, floor: 0, ceiling: 4},
		{name: "failed update, reverted", setup: deployed("nginx:1.26", rolling),
			run: func(r *chaosRun) {
				ro := rolling()
				ro.ProgressDeadlineSeconds = &deadline
				r.deploy(webManifest(r.lease, "nginx:1.27", ro, true))
			},
			phase: workflows.PhaseFailed, revision: 2, floor: 4, ceiling: 5,
			after: func(r *chaosRun) []string { return r.webRuns("nginx:1.26", 4) }},
		{name: "canary", setup: deployed("nginx:1.26", rolling),
			run: func(r *chaosRun) {
				ro := rolling()
				w := int32(50)
				ro.Strategy, ro.Steps = manifest.StrategyCanary, []manifest.CanaryStep{{SetWeight: &w}, {Pause: &manifest.Pause{Duration: "2s"}}}
				r.deploy(webManifest(r.lease, "nginx:1.27", ro, false))
			},
			phase: workflows.PhaseActive, revision: 2, floor: 4, ceiling: 5},
		{name: "teardown", setup: deployed("nginx:1.26", rolling), run: func(r *chaosRun) { r.teardown() },
			phase: workflows.PhaseTornDown, revision: 1, floor: 0, ceiling: 4,
			after: func(r *chaosRun) []string { return r.nothingHeld() }},
	}
}

func faults() []fault {
	return []fault{
		{name: "worker SIGKILL, restart in 0-5s", workers: 1, inject: func(r *chaosRun) {
			w := r.workers[0]
			_ = w.cmd.Process.Signal(syscall.SIGKILL)
			<-w.exited
			time.Sleep(time.Duration(r.rng.IntN(5001)) * time.Millisecond)
			r.workers[0] = startWorker(r.t, r.env, r.tq, freeAddr(r.t))
		}},
		{name: "one of two workers SIGKILLed", workers: 2, inject: func(r *chaosRun) {
			w := r.workers[r.rng.IntN(2)]
			_ = w.cmd.Process.Signal(syscall.SIGKILL)
			<-w.exited
		}},
	}
}

// result is one (scenario, fault) cell of the report.
type result struct {
	runs, passed int
	worst        time.Duration
	failures     []string
}

func TestChaos(t *testing.T) {
	env := testenv.Get(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DEPLOYFLOW_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "DEPLOYFLOW_CHAOS_SEED")
		seed = v
	}
	oneBoundary := os.Getenv("DEPLOYFLOW_CHAOS_BOUNDARIES") == "one"
	t.Logf("chaos seed %d (DEPLOYFLOW_CHAOS_SEED=%d reruns these choices)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	started := time.Now()
	report := map[string]*result{}
	var keys []string
	only := os.Getenv("DEPLOYFLOW_CHAOS_SCENARIO")
	for _, sc := range scenarios() {
		if only != "" && sc.name != only {
			continue
		}
		// The probe: the scenario without a fault, to find its boundaries.
		probe := newChaosRun(t, env, 1, rng)
		sc.setup(probe)
		from := time.Now()
		sc.run(probe)
		end, msgs := probe.finish(sc, time.Time{})
		n := probe.boundaries(from)
		probe.close()
		require.Empty(t, msgs, "%s: the scenario fails without a fault: %v", sc.name, msgs)
		t.Logf("%s: %d boundaries (%s without a fault)", sc.name, n, end.Round(time.Millisecond))
		for _, f := range faults() {
			ks := make([]int, n)
			for i := range ks {
				ks[i] = i + 1
			}
			if oneBoundary {
				ks = []int{1 + rng.IntN(n)}
			}
			key := sc.name + "\t" + f.name
			keys = append(keys, key)
			res := &result{}
			report[key] = res
			for _, k := range ks {
				r := newChaosRun(t, env, f.workers, rng)
				sc.setup(r)
				from := time.Now()
				sc.run(r)
				r.waitBoundary(from, k, sc)
				at := time.Now()
				f.inject(r)
				took, msgs := r.finish(sc, at)
				r.close()
				res.runs++
				if took > res.worst {
					res.worst = took
				}
				if len(msgs) == 0 {
					res.passed++
					continue
				}
				res.failures = append(res.failures, fmt.Sprintf("boundary %d/%d: %s", k, n, strings.Join(msgs, "; ")))
				t.Errorf("%s, %s, after boundary %d/%d (lease %s): %s", sc.name, f.name, k, n, r.lease, strings.Join(msgs, "; "))
			}
		}
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tFAULT\tRUNS\tPASSED\tWORST RECOVERY")
	for _, k := range keys {
		r := report[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", k, r.runs, r.passed, r.worst.Round(100*time.Millisecond))
	}
	_ = tw.Flush()
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "\n%d scenarios × %d faults in %s on %s (seed %d, boundaries: %s)\n", len(scenarios()), len(faults()),
		time.Since(started).Round(time.Second), host, seed, map[bool]string{true: "one per fault", false: "every one"}[oneBoundary])
	t.Log("\n" + b.String())
	file := os.Getenv("DEPLOYFLOW_CHAOS_REPORT")
	if file == "" {
		file = filepath.Join(os.TempDir(), "deployflow-chaos-report.txt")
	}
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o644))
	t.Logf("report written to %s", file)
}

func newChaosRun(t *testing.T, env *testenv.Env, workers int, rng *rand.Rand) *chaosRun {
	r := &chaosRun{t: t, env: env, tq: testenv.Name(t, "tq"), lease: testenv.ShortName("chaos"), rng: rng}
	createLease(t, env, r.lease)
	for range workers {
		r.workers = append(r.workers, startWorker(t, env, r.tq, freeAddr(t)))
	}
	return r
}

// close ends the run: its workers, its lease and what it deployed, so the
// next run starts from a quiet stack.
func (r *chaosRun) close() {
	ctx := context.Background()
	for _, w := range r.workers {
		_ = w.cmd.Process.Kill()
	}
	acts := r.env.Activities()
	_ = r.env.Temporal.TerminateWorkflow(ctx, workflows.DeployWorkflowID(r.lease), "", "chaos run over")
	_ = acts.Hostnames.ReleaseAll(ctx, r.lease)
	_ = acts.IPs.ReleaseAll(ctx, r.lease)
	_ = r.env.Kube.CoreV1().Namespaces().Delete(ctx, manifest.Namespace(r.lease), metav1.DeleteOptions{})
	_ = r.env.Dynamic.Resource(crds.Leases).Delete(ctx, r.lease, metav1.DeleteOptions{})
}

// deploy sends the lease's workflow a manifest (starting it if need be).
func (r *chaosRun) deploy(m manifest.Manifest) {
	ctx := context.Background()
	start := r.env.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: workflows.DeployWorkflowID(r.lease), TaskQueue: r.tq,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, workflows.DeployWorkflow, workflows.DeployInput{Manifest: m, Trigger: "chaos", DegradedAfterSeconds: 30})
	h, err := r.env.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{WorkflowID: workflows.DeployWorkflowID(r.lease), UpdateName: workflows.UpdateDeploy,
			Args: []any{workflows.DeployRequest{Manifest: m, Trigger: "chaos"}}, WaitForStage: client.WorkflowUpdateStageAccepted},
	})
	require.NoError(r.t, err)
	_ = h
}

func (r *chaosRun) teardown() {
	_, err := r.env.Temporal.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{
		WorkflowID: workflows.DeployWorkflowID(r.lease), UpdateName: workflows.UpdateTeardown, WaitForStage: client.WorkflowUpdateStageAccepted})
	require.NoError(r.t, err)
}

func (r *chaosRun) status() (workflows.DeployStatus, error) {
	var st workflows.DeployStatus
	v, err := r.env.Temporal.QueryWorkflow(context.Background(), workflows.DeployWorkflowID(r.lease), "", workflows.QueryDeploy)
	if err == nil {
		err = v.Get(&st)
	}
	return st, err
}

// done reports whether deploy number rev has ended in phase.
func done(st workflows.DeployStatus, phase string, rev int64) bool {
	if phase == workflows.PhaseTornDown {
		return st.Phase == phase
	}
	return st.Revision >= rev && !st.Pending && st.Phase == phase && len(st.History) > 0 && st.History[len(st.History)-1].Revision >= rev
}

func (r *chaosRun) waitPhase(phase string, rev int64) {
	r.t.Helper()
	testenv.Eventually(r.t, 2*time.Minute, 100*time.Millisecond, "lease "+r.lease+" never "+phase, func() (bool, string) {
		st, err := r.status()
		if err != nil {
			return false, err.Error()
		}
		return done(st, phase, rev), fmt.Sprintf("%s #%d", st.Phase, st.Revision)
	})
}

// boundaries counts the completions since a time in the histories of the
// lease's workflow and its web and api rollouts (their latest runs): a step
// boundary is right after one.
func (r *chaosRun) boundaries(since time.Time) int {
	ctx := context.Background()
	n := 0
	ns := manifest.Namespace(r.lease)
	for _, id := range []string{workflows.DeployWorkflowID(r.lease), workflows.RolloutWorkflowID(ns, "web"), workflows.RolloutWorkflowID(ns, "api")} {
		it := r.env.Temporal.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				break
			}
			if !ev.GetEventTime().AsTime().After(since) {
				continue
			}
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_MARKER_RECORDED, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
				enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_TIMER_FIRED:
				n++
			}
		}
	}
	return n
}

// waitBoundary waits until the histories hold k completions since a time,
// or the deploy has ended with fewer (pods' timing varies the number of
// waits a rollout takes): the fault then hits the lease at rest.
func (r *chaosRun) waitBoundary(since time.Time, k int, sc scenario) {
	r.t.Helper()
	testenv.Eventually(r.t, 2*time.Minute, 20*time.Millisecond, fmt.Sprintf("boundary %d never came", k), func() (bool, string) {
		n := r.boundaries(since)
		if n >= k {
			return true, ""
		}
		st, err := r.status()
		return err == nil && done(st, sc.phase, sc.revision), strconv.Itoa(n)
	})
}

// finish samples the web ReplicaSets until the deploy ends (within 3
// minutes of the fault), then checks the invariants. It returns the time
// from the fault (or from now) to the end, and what did not hold.
func (r *chaosRun) finish(sc scenario, fault time.Time) (time.Duration, []string) {
	if fault.IsZero() {
		fault = time.Now()
	}
	var msgs []string
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the web pods, sampled: never fewer available than the floor, never more than the ceiling
		defer wg.Done()
		minAvail, maxPods := int32(1<<30), int32(0)
		var worst string
		for {
			select {
			case <-stop:
				mu.Lock()
				if minAvail < sc.floor && minAvail != 1<<30 {
					msgs = append(msgs, fmt.Sprintf("web had %d available pods, below %d (%s)", minAvail, sc.floor, worst))
				}
				if maxPods > sc.ceiling {
					msgs = append(msgs, fmt.Sprintf("web had %d pods, above %d", maxPods, sc.ceiling))
				}
				mu.Unlock()
				return
			case <-time.After(50 * time.Millisecond):
			}
			list, err := r.env.Kube.AppsV1().ReplicaSets(manifest.Namespace(r.lease)).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
			if err != nil || len(list.Items) == 0 {
				continue
			}
			var avail, pods int32
			var seen []string
			for _, rs := range list.Items {
				avail += rs.Status.AvailableReplicas
				pods += rs.Status.Replicas
				seen = append(seen, fmt.Sprintf("%s spec %d, %d pods, %d available", rs.Spec.Template.Spec.Containers[0].Image, *rs.Spec.Replicas, rs.Status.Replicas, rs.Status.AvailableReplicas))
			}
			if avail < minAvail {
				sort.Strings(seen)
				worst = strings.Join(seen, "; ")
			}
			minAvail, maxPods = min(minAvail, avail), max(maxPods, pods)
		}
	}()
	var st workflows.DeployStatus
	var err error
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if st, err = r.status(); err == nil && done(st, sc.phase, sc.revision) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(fault)
	close(stop)
	wg.Wait()
	if err != nil || !done(st, sc.phase, sc.revision) {
		msgs = append(msgs, fmt.Sprintf("the deploy did not end %s #%d within 3m of the fault (last: %s #%d, %v)", sc.phase, sc.revision, st.Phase, st.Revision, err))
		return took, msgs
	}
	if st.Revision != sc.revision {
		msgs = append(msgs, fmt.Sprintf("deploy #%d: a restart or an outage deployed again (want #%d)", st.Revision, sc.revision))
	}
	if sc.phase != workflows.PhaseTornDown {
		msgs = append(msgs, r.objectsOnce()...)
		msgs = append(msgs, r.reservationsHeld()...)
	}
	if sc.after != nil {
		msgs = append(msgs, sc.after(r)...)
	}
	return took, msgs
}

// objectsOnce: every object exists once: one ReplicaSet per revision, the
// Services and the Ingress of the manifest.
func (r *chaosRun) objectsOnce() []string {
	ctx := context.Background()
	ns := manifest.Namespace(r.lease)
	var msgs []string
	rss, err := r.env.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"list ReplicaSets: " + err.Error()}
	}
	templates := map[string]int{}
	for _, rs := range rss.Items {
		templates[rs.Labels[activities.ServiceLabel]+" "+rs.Spec.Template.Spec.Containers[0].Image+" "+strings.Join(sortedLabels(rs.Spec.Template.Labels), ",")]++
	}
	for k, n := range templates {
		if n > 1 {
			msgs = append(msgs, fmt.Sprintf("%d ReplicaSets run one template (%s)", n, k))
		}
	}
	svcs, err := r.env.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err == nil && len(svcs.Items) != 3 {
		msgs = append(msgs, fmt.Sprintf("%d Services, want web, api and api-ip-public", len(svcs.Items)))
	}
	ings, err := r.env.Kube.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
	if err == nil && len(ings.Items) != 1 {
		msgs = append(msgs, fmt.Sprintf("%d Ingresses, want 1", len(ings.Items)))
	}
	return msgs
}

func sortedLabels(l map[string]string) []string {
	var out []string
	for k, v := range l {
		if k != "pod-template-hash" {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// reservationsHeld: the lease holds its hostname and its IP, no more.
func (r *chaosRun) reservationsHeld() []string {
	ctx := context.Background()
	acts := r.env.Activities()
	var msgs []string
	held, err := acts.Hostnames.Held(ctx, r.lease)
	if err != nil || len(held) != 1 || held[0] != r.lease+chaosHost {
		msgs = append(msgs, fmt.Sprintf("hostnames held %v (%v), want [%s]", held, err, r.lease+chaosHost))
	}
	ips, err := acts.IPs.Declared(ctx, r.lease)
	if err != nil || len(ips) != 1 || ips["public"] == "" {
		msgs = append(msgs, fmt.Sprintf("IPs declared %v (%v), want public", ips, err))
	}
	return msgs
}

// nothingHeld: a torn-down lease holds no hostname and no IP.
func (r *chaosRun) nothingHeld() []string {
	ctx := context.Background()
	acts := r.env.Activities()
	var msgs []string
	if held, err := acts.Hostnames.Held(ctx, r.lease); err != nil || len(held) > 0 {
		msgs = append(msgs, fmt.Sprintf("torn down, still holds hostnames %v (%v)", held, err))
	}
	if ips, err := acts.IPs.Declared(ctx, r.lease); err != nil || len(ips) > 0 {
		msgs = append(msgs, fmt.Sprintf("torn down, still holds IPs %v (%v)", ips, err))
	}
	return msgs
}

// webRuns: web runs image with n available pods and nothing else.
func (r *chaosRun) webRuns(image string, n int32) []string {
	list, err := r.env.Kube.AppsV1().ReplicaSets(manifest.Namespace(r.lease)).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	if err != nil {
		return []string{err.Error()}
	}
	avail := map[string]int32{}
	for _, rs := range list.Items {
		avail[rs.Spec.Template.Spec.Containers[0].Image] += rs.Status.AvailableReplicas
	}
	var msgs []string
	for img, a := range avail {
		if (img == image && a != n) || (img != image && a != 0) {
			msgs = append(msgs, fmt.Sprintf("web: %d available of %s, want %s × %d only", a, img, image, n))
		}
	}
	return msgs
}
