package main

// The fleet benchmark (issue 11.4): the real worker binary, one task queue,
// many leases deployed at once and then left idle. Everything is measured
// side by side in one run: each fleet's times against a solo deploy, the
// histories the deploys wrote, the worker's kube-apiserver requests (from
// the audit log, by user agent) and the worker process's CPU and memory
// (from /proc).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/k8s/kube"
)

// workerAgent is the worker binary's Kubernetes user agent.
const workerAgent = "deployflow-worker"

type fleet struct {
	stack    *devstack.Stack
	temporal client.Client
	leases   *lease.KubeStore
	dyn      dynamic.Interface
	tq       string
	prefix   string
	worker   *exec.Cmd
	addr     string   // its metrics address
	startRSS float64  // the worker's resident set once ready, MiB
	started  []string // every lease this run created
}

// deployResult is one lease's first deploy.
type deployResult struct {
	lease   string
	took    time.Duration
	err     error
	firstID string // the run that deployed (it continued as new after)
}

func runFleet(ctx context.Context, s *devstack.Stack, tc client.Client, dyn dynamic.Interface, sizes []int, idle int, idleFor time.Duration) error {
	f := &fleet{stack: s, temporal: tc, leases: lease.NewKubeStore(dyn), dyn: dyn,
		tq: fmt.Sprintf("bench-fleet-%d", time.Now().UnixNano()), prefix: fmt.Sprintf("bf%x", time.Now().Unix()%0xffff)}
	if err := f.startWorker(); err != nil {
		return err
	}
	defer f.cleanup(ctx)
	stopKCM, err := s.StartControllerManager(ctx, nativeDeploymentController, "deployment-controller", "10261")
	if err != nil {
		return fmt.Errorf("native deployment controller: %w", err)
	}
	defer stopKCM()
	nf, err := newNativeFleet(s, f.prefix)
	if err != nil {
		return err
	}
	defer nf.cleanup(ctx)
	meter := cpuMeter{stack: s, worker: func() int { return f.worker.Process.Pid }}

	fmt.Fprintf(out, "\nfleet: the worker binary on one task queue; one-service leases (1 replica, one hostname); %s; machine: %s\n\n", temporalShape(s), machine())
	solo, err := f.deployAll(ctx, 1, 0)
	if err != nil {
		return err
	}
	if err := solo.results[0].err; err != nil {
		return fmt.Errorf("solo deploy: %w", err)
	}
	soloTook := solo.results[0].took
	soloReqs, err := f.requests(solo.start, solo.end)
	if err != nil {
		return err
	}
	events, rolloutEvents, own, actions, err := f.historyCost(ctx, solo.results[0])
	if err != nil {
		return err
	}

	nativeSolo, err := nf.deployAll(ctx, 1)
	if err != nil {
		return err
	}
	type row struct {
		n              int
		p50, p99       time.Duration
		errs           int
		reqsPerDeploy  float64
		cpuPer100      float64
		all            time.Duration
		native         batch
		cpu, nativeCPU map[string]float64 // per component, the whole batch
	}
	var rows []row
	for _, n := range sizes {
		cpu0 := f.cpuSeconds()
		c0 := meter.read()
		b, err := f.deployAll(ctx, n, 0)
		if err != nil {
			return err
		}
		c1 := meter.read()
		nb, err := nf.deployAll(ctx, n)
		if err != nil {
			return err
		}
		c2 := meter.read()
		reqs, err := f.requests(b.start, b.end)
		if err != nil {
			return err
		}
		p50, p99, errs := percentiles(b.results)
		rows = append(rows, row{n: n, p50: p50, p99: p99, errs: errs, reqsPerDeploy: float64(reqs) / float64(n),
			cpuPer100: (c1["worker"] - cpu0) * 100 / float64(n), all: timeToAll(b), native: nb,
			cpu: cpuDelta(c0, c1), nativeCPU: cpuDelta(c1, c2)})
	}
	// The idle leases beyond the fleets, idleBatch at a time: all at once,
	// 805 of 2,000 deploys failed ("context deadline exceeded"), unseen,
	// and a lease with nothing deployed answers every observation
	// "known" (issue 40.1: half the observers' changes were of such
	// leases). Those that fail are printed and left out of the changes.
	failedIdle := 0
	for more := idle - len(f.started) - 1; more > 0; more -= idleBatch {
		b, err := f.deployAll(ctx, min(more, idleBatch), 0)
		if err != nil {
			return err
		}
		for _, r := range b.results {
			if r.err != nil {
				if failedIdle < 5 {
					fmt.Fprintf(out, "fleet: idle lease %s did not deploy: %v\n", r.lease, r.err)
				}
				failedIdle++
			}
		}
	}
	if failedIdle > 0 {
		fmt.Fprintf(out, "fleet: %d idle leases did not deploy (left out of the observers' changes)\n", failedIdle)
	}
	// One lease whose safety net ticks 5 times in the window shows what a
	// tick costs (idle leases tick once an hour by default).
	tickEvery := max(int(idleFor.Seconds())/5, 1)
	ticker, err := f.deployAll(ctx, 1, tickEvery)
	if err != nil {
		return err
	}
	tickLease := ticker.results[0].lease

	// Idle: nothing happens to the leases; what do they cost?
	time.Sleep(5 * time.Second) // let the last deploys' continue-as-new settle
	before, err := f.historyLengths(ctx)
	if err != nil {
		return err
	}
	cpu0 := f.cpuSeconds()
	from := time.Now()
	time.Sleep(idleFor)
	to := time.Now()
	after, err := f.historyLengths(ctx)
	if err != nil {
		return err
	}
	idleCPU := f.cpuSeconds() - cpu0
	idleReqs, membershipReqs, err := f.idleRequests(from, to)
	if err != nil {
		return err
	}
	added, tickAdded := 0, 0
	for id, n := range after {
		if strings.HasPrefix(id, tickLease+"/") {
			tickAdded = n - before[id]
			continue
		}
		added += n - before[id]
	}
	idleLeases := len(after) - 1
	leaseHours := float64(idleLeases) * to.Sub(from).Hours()
	ticks := int(to.Sub(from).Seconds()) / tickEvery
	rss := f.peakRSS()

	fmt.Fprintf(out, "%-44s %10s %10s %8s %8s %14s %16s\n", "concurrent deploys", "p50", "p99", "p99/solo", "errors", "requests/deploy", "CPU s/100 deploys")
	fmt.Fprintf(out, "%-44s %10s %10s %8s %8s %14d %16s\n", "1 (solo)", round(soloTook), round(soloTook), "1.00", "0", soloReqs, "-")
	for _, r := range rows {
		fmt.Fprintf(out, "%-44s %10s %10s %8.2f %8d %14.1f %16.2f\n", strconv.Itoa(r.n), round(r.p50), round(r.p99),
			float64(r.p99)/float64(soloTook), r.errs, r.reqsPerDeploy, r.cpuPer100)
	}

	// Side by side with the native Deployment controller (issue 22.2).
	fmt.Fprintf(out, "\nside by side with the native Deployment controller (namespace, Service and a 1-replica Deployment each, created concurrently):\n")
	fmt.Fprintf(out, "%-20s %10s %10s %10s %8s | %10s %10s %10s %8s | %s\n", "concurrent deploys",
		"p50", "p99", "all", "errors", "native p50", "p99", "all", "errors", "p99 deployflow/native")
	side := func(n string, p50, p99, all time.Duration, errs int, nb batch) {
		np50, np99, nerrs := percentiles(nb.results)
		fmt.Fprintf(out, "%-20s %10s %10s %10s %8d | %10s %10s %10s %8d | %.2f\n", n,
			round(p50), round(p99), round(all), errs, round(np50), round(np99), round(timeToAll(nb)), nerrs, float64(p99)/float64(np99))
	}
	side("1 (solo)", soloTook, soloTook, soloTook, 0, nativeSolo)
	for _, r := range rows {
		side(strconv.Itoa(r.n), r.p50, r.p99, r.all, r.errs, r.native)
	}
	if len(rows) > 0 {
		fmt.Fprintf(out, "\nCPU seconds per 100 deploys, by component (each batch's own window; %s):\n", temporalShape(s))
		fmt.Fprintf(out, "%-34s", "component")
		for _, r := range rows {
			fmt.Fprintf(out, " %13s %13s", fmt.Sprintf("deployflow %d", r.n), fmt.Sprintf("native %d", r.n))
		}
		fmt.Fprintln(out)
		for _, c := range meter.components() {
			fmt.Fprintf(out, "%-34s", c)
			for _, r := range rows {
				fmt.Fprintf(out, " %13.2f %13.2f", r.cpu[c]*100/float64(r.n), r.nativeCPU[c]*100/float64(r.n))
			}
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "%-34s", "total")
		for _, r := range rows {
			t, nt := 0.0, 0.0
			for _, c := range meter.components() {
				t, nt = t+r.cpu[c], nt+r.nativeCPU[c]
			}
			fmt.Fprintf(out, " %13.2f %13.2f", t*100/float64(r.n), nt*100/float64(r.n))
		}
		fmt.Fprintln(out)
	}

	fmt.Fprintf(out, "\n%-44s %d (lease runs %d + rollout %d; target <= 30), %d besides workflow tasks\n", "history events per single-service deploy", events+rolloutEvents, events, rolloutEvents, own)
	fmt.Fprintf(out, "%-44s %d (Temporal Cloud's billable actions, counted from the histories)\n", "actions per deploy", actions)
	fmt.Fprintf(out, "%-44s %d leases for %s: %.2f events and %.3f apiserver requests per lease-hour, measured (targets <= 5 and 0)\n",
		"idle", idleLeases, round(to.Sub(from)), float64(added)/leaseHours, float64(idleReqs)/leaseHours)
	fmt.Fprintf(out, "%-44s %.0f requests per worker-hour besides, whatever the leases: the renewals of its observer membership\n",
		"", float64(membershipReqs)/to.Sub(from).Hours())
	if ticks > 0 {
		fmt.Fprintf(out, "%-44s %.1f events per tick (%d ticks of one lease every %ds): %.1f events per lease-hour at the default 1h\n",
			"safety-net tick", float64(tickAdded)/float64(ticks), ticks, tickEvery, float64(tickAdded)/float64(ticks))
	}
	fmt.Fprintf(out, "%-44s %.1f CPU s per 100 idle lease-hours (the whole worker's CPU while idle, over its leases)\n", "", idleCPU*100/leaseHours)
	fmt.Fprintf(out, "%-44s %.1f MiB peak RSS with %d leases (%.1f MiB at start): %.1f MiB more per 100 leases\n",
		"worker", rss, len(after), f.startRSS, (rss-f.startRSS)*100/float64(len(after)))
	rest := f.procStatusMiB("VmRSS:")
	if path, err := saveHeapProfile(f.addr); err != nil {
		fmt.Fprintf(out, "fleet: the worker's heap profile at rest: %v\n", err)
	} else {
		fmt.Fprintf(out, "fleet: the worker's heap profile at rest: %s (go tool pprof -top -sample_index=inuse_space %s)\n", path, path)
	}
	fmt.Fprintf(out, "%-44s %s (after the profile's garbage collection)\n", "", goRuntimeLine(f.addr))
	fmt.Fprintf(out, "%-44s %.1f MiB resident at rest after the idle period, %s workflows in its sticky cache (--sticky-cache-size %s): %.1f MiB per 100 leases above its start\n",
		"", rest, stickyCached(f.addr), stickySize(), (rest-f.startRSS)*100/float64(len(after)))

	if len(sizes) > 0 {
		if err := f.hostileShare(ctx, meter, min(sizes[0], 10)); err != nil {
			return err
		}
	}

	kc, err := kube.NewClientset(s.Kubeconfig(), "", "deployflow-bench")
	if err != nil {
		return err
	}
	// The observers' changes are of leases that are Active: one that
	// never deployed has nothing to observe.
	var share []string
	for id := range after {
		l, _, _ := strings.Cut(id, "/")
		if l == tickLease || len(share) == 50 {
			continue
		}
		if st, err := f.statusAgain(ctx, l); err == nil && st.Phase == api.PhaseActive {
			share = append(share, l)
		}
	}
	return f.observerShare(ctx, kc, share)
}

// idleBatch is how many idle leases deploy at once.
const idleBatch = 250

// batch is one set of deploys started together.
type batch struct {
	start, end time.Time
	results    []deployResult
}

// deployAll creates n leases and deploys each, all at once (with the given
// healthIntervalSeconds, 0 for the default safety net), and waits until
// every deploy has ended.
func (f *fleet) deployAll(ctx context.Context, n, healthInterval int) (batch, error) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", f.prefix, len(f.started)+i)
		if _, err := f.leases.Create(ctx, ids[i], "bench"); err != nil {
			return batch{}, err
		}
	}
	f.started = append(f.started, ids...)
	b := batch{start: time.Now(), results: make([]deployResult, n)}
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.results[i] = f.deploy(ctx, id, healthInterval)
		}()
	}
	wg.Wait()
	b.end = time.Now()
	return b, nil
}

// deploy starts the lease's workflow with its first manifest in its input,
// as `temporal workflow start` does (the start returns once persisted; an
// Update-with-Start would also wait for a busy worker to accept it), and
// waits for that deploy to end: the run continues as new once it has.
func (f *fleet) deploy(ctx context.Context, id string, healthInterval int) deployResult {
	one := int32(1)
	m := manifest.Manifest{Lease: id, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &one,
		Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{id + ".bench.example.com"}}}}}}}}
	start := time.Now()
	res := deployResult{lease: id}
	run, err := f.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: api.DeployWorkflowID(id), TaskQueue: f.tq},
		api.DeployWorkflow, api.DeployInput{Manifest: m, Trigger: "bench", HealthIntervalSeconds: healthInterval})
	if err != nil {
		res.err = err
		return res
	}
	res.firstID = run.GetRunID()
	// The deploying run ends by continuing as new.
	for {
		it := f.temporal.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), true, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		var closed bool
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				break // a long poll that timed out: poll again
			}
			res.took, closed = ev.GetEventTime().AsTime().Sub(start), true
		}
		if closed {
			break
		}
		if time.Since(start) > 30*time.Minute {
			res.err = fmt.Errorf("lease %s: its deploy did not end in 30 minutes", id)
			return res
		}
	}
	st, err := f.statusAgain(ctx, id)
	switch {
	case err != nil:
		res.err = err
	case st.Phase != api.PhaseActive:
		res.err = fmt.Errorf("lease %s: %s after its deploy: %s", id, st.Phase, st.LastError)
	}
	return res
}

func (f *fleet) status(ctx context.Context, id string) (api.DeployStatus, error) {
	var st api.DeployStatus
	v, err := f.temporal.QueryWorkflow(ctx, api.DeployWorkflowID(id), "", api.QueryStatus)
	if err == nil {
		err = v.Get(&st)
	}
	return st, err
}

// statusAgain is status asked again a second apart, for up to a minute:
// a busy worker may time a query out, and a query is refused while the
// workflow's last task failed or timed out, until its next attempt
// completes ("Workflow Task in failed state"). On the 2-core machine
// creating the 20,000-lease fleet, a continued run's first task timed
// out (10 s) and its next attempt completed 27 s later: ten tries a
// second apart counted that Active lease as not deployed.
func (f *fleet) statusAgain(ctx context.Context, id string) (api.DeployStatus, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := f.status(ctx, id)
		if err == nil || time.Now().After(deadline) {
			return st, err
		}
		time.Sleep(time.Second)
	}
}

// historyCost is the events of one deploy (the lease's deploying run and
// its rollout child) and the Temporal Cloud actions they bill.
func (f *fleet) historyCost(ctx context.Context, r deployResult) (leaseEvents, rolloutEvents, own, actions int, err error) {
	if r.err != nil {
		return 0, 0, 0, 0, r.err
	}
	deploy, err := f.history(ctx, api.DeployWorkflowID(r.lease), r.firstID)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	ro, err := f.history(ctx, api.RolloutWorkflowID(manifest.Namespace(r.lease), "web"), "")
	if err != nil {
		return 0, 0, 0, 0, err
	}
	return len(deploy), len(ro), besidesTasks(deploy) + besidesTasks(ro), billableActions(deploy) + billableActions(ro), nil
}

// besidesTasks counts a history's events other than its workflow tasks'
// (scheduled, started, completed, failed, timed out): how many workflow
// tasks a deploy takes is the server's timing (a signal or an update
// handed over apart from the task before it takes one more), not the
// workflow's.
func besidesTasks(events []*history.HistoryEvent) int {
	n := 0
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
			enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
		default:
			n++
		}
	}
	return n
}

func (f *fleet) history(ctx context.Context, id, runID string) ([]*history.HistoryEvent, error) {
	it := f.temporal.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*history.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// billableActions counts a history's actions as Temporal Cloud lists them:
// a workflow started (or continued as new), a child workflow started, an
// activity started (each attempt), the local activities of one workflow
// task (together one), a timer started, a signal or an update received, a
// search-attribute upsert, a side effect or version marker... as we read
// the list: an estimate for comparing runs, not a bill.
func billableActions(events []*history.HistoryEvent) int {
	n := 0
	localInTask := false
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
			enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
			enumspb.EVENT_TYPE_TIMER_STARTED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
			enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
			enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
			n++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
				if !localInTask {
					n++
				}
				localInTask = true
			} else {
				n++ // side effects, versions
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			localInTask = false
		}
	}
	return n
}

// historyLengths is every bench lease workflow's current run length (a
// lease whose workflow never started has none), read 16 at a time.
func (f *fleet) historyLengths(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	var mu sync.Mutex
	err := forEach(len(f.started), 16, func(i int) error {
		id := f.started[i]
		d, err := f.temporal.DescribeWorkflowExecution(ctx, api.DeployWorkflowID(id), "")
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return nil // its start failed (counted in its batch's errors): not idle
		}
		if err != nil {
			return err
		}
		// Idle runs do not continue as new in the window; count this run.
		mu.Lock()
		out[id+"/"+d.GetWorkflowExecutionInfo().GetExecution().GetRunId()] = int(d.GetWorkflowExecutionInfo().GetHistoryLength())
		mu.Unlock()
		return nil
	})
	return out, err
}

// requests counts the worker's kube-apiserver requests in [from, to].
func (f *fleet) requests(from, to time.Time) (int, error) {
	leases, _, err := f.idleRequests(from, to)
	return leases, err
}

// idleRequests splits the worker's requests between from and to: those
// for its leases, and its own observer membership's (the renewals of its
// record in coordination.k8s.io, a fixed cost per worker and cluster,
// whatever the number of leases; one every 5 s). Issue 40.3: the idle
// figure counted them, 0.72 requests per lease-hour at 2,000 leases
// (1,440 an hour); the slice measures 0 for the leases and 720 per
// worker-hour apart.
func (f *fleet) idleRequests(from, to time.Time) (leases, membership int, err error) {
	time.Sleep(time.Second) // the audit log is written in batches
	err = auditEntries(f.stack.AuditLog(), workerAgent, from, to, func(e auditEntry) {
		switch {
		case !strings.HasPrefix(e.UserAgent, workerAgent):
		case e.ObjectRef.APIGroup == "coordination.k8s.io" && e.ObjectRef.Resource == "leases":
			membership++
		default:
			leases++
		}
	})
	return leases, membership, err
}

func (f *fleet) startWorker() error {
	cmd, addr, err := f.spawnWorker("bench-fleet")
	if err != nil {
		return err
	}
	f.worker, f.addr = cmd, addr
	f.startRSS = f.peakRSS()
	return nil
}

// spawnWorker starts a worker binary on the fleet's task queue, with the
// given observer identity, and waits until it is ready.
func (f *fleet) spawnWorker(identity string) (*exec.Cmd, string, error) {
	wd, _ := os.Getwd()
	repo, err := devstack.FindRepo(wd)
	if err != nil {
		return nil, "", err
	}
	bin := filepath.Join(repo, "bin", "deployflow-worker")
	if _, err := os.Stat(bin); err != nil {
		return nil, "", fmt.Errorf("%s: run make build first: %w", bin, err)
	}
	addr, err := devstack.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	args := []string{"--kubeconfig", f.stack.Kubeconfig(), "--task-queue", f.tq, "--metrics-address", addr,
		"--temporal-address", devstack.TemporalAddress, "--temporal-namespace", temporalNamespace, "--log-level", "warn", "--allow-pod-keys", strings.Join(devstack.KwokKnobs, ","),
		"--observer-identity", identity, "--profiling"}
	if workerStickyCache > 0 {
		args = append(args, "--sticky-cache-size", strconv.Itoa(workerStickyCache))
	}
	cmd := exec.Command(bin, args...)
	logFile, err := os.CreateTemp("", "bench-worker-*.log")
	if err != nil {
		return nil, "", err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	fmt.Fprintf(out, "fleet: worker %s pid %d, log %s\n", identity, cmd.Process.Pid, logFile.Name())
	for i := 0; i < 300; i++ {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd, addr, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, "", errors.New("the worker never became ready; see its log")
}

// goRuntimeLine is where the worker at addr keeps its memory, from its Go
// runtime metrics: its goroutines' stacks (a workflow in the SDK's cache
// keeps its coroutines, each a goroutine), the heap's live objects, the
// heap's spans in use beyond them, and the memory the heap holds idle and
// has not returned to the OS.
func goRuntimeLine(addr string) string {
	text := scrape(addr)
	mib := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(text)
		if m == nil {
			return -1
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v / (1 << 20)
	}
	goroutines := mib("go_goroutines") * (1 << 20)
	return fmt.Sprintf("Go runtime: %.0f goroutines, stacks %.1f MiB; heap: %.1f MiB of live objects in %.1f MiB of spans, %.1f MiB idle not returned to the OS; %.1f MiB from the OS in all",
		goroutines, mib("go_memstats_stack_inuse_bytes"), mib("go_memstats_heap_alloc_bytes"), mib("go_memstats_heap_inuse_bytes"),
		mib("go_memstats_heap_idle_bytes")-mib("go_memstats_heap_released_bytes"), mib("go_memstats_sys_bytes"))
}

// saveHeapProfile writes the heap profile of the worker at addr (served
// with --profiling) to a file, after a garbage collection: what it holds
// at rest, by the code that allocated it.
func saveHeapProfile(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /debug/pprof/heap: %s", resp.Status)
	}
	f, err := os.CreateTemp("", "bench-worker-heap-*.pb.gz")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

// cpuSeconds is the worker process's user+system CPU time so far.
func (f *fleet) cpuSeconds() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", f.worker.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// stickyCached is the worker's temporal_sticky_cache_size gauge (the
// workflows it keeps in memory between tasks), "?" if it exports none.
func stickyCached(addr string) string {
	if m := regexp.MustCompile(`(?m)^temporal_sticky_cache_size(?:\{[^}]*\})? (\S+)$`).FindStringSubmatch(scrape(addr)); m != nil {
		return m[1]
	}
	return "?"
}

// stickySize is the workers' --sticky-cache-size as the bench set it.
func stickySize() string {
	if workerStickyCache > 0 {
		return strconv.Itoa(workerStickyCache)
	}
	return fmt.Sprintf("default, %d", config.DefaultStickyCacheSize)
}

// peakRSS is the worker's peak resident set, in MiB.
func (f *fleet) peakRSS() float64 { return f.procStatusMiB("VmHWM:") }

// procStatusMiB is a field of the worker's /proc status in kB, in MiB.
func (f *fleet) procStatusMiB(field string) float64 {
	return procStatusMiB(f.worker.Process.Pid, field)
}

// procStatusMiB is a field of process pid's /proc status in kB, in MiB.
func procStatusMiB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// cleanup closes every bench lease (its workflow tears it down, told by the
// worker's observer), waits for them to end, and stops the worker.
func (f *fleet) cleanup(ctx context.Context) {
	_ = forEach(len(f.started), 16, func(i int) error {
		_, _ = f.leases.Close(ctx, f.started[i])
		return nil
	})
	deadline := time.Now().Add(10 * time.Minute)
	_ = forEach(len(f.started), 16, func(i int) error {
		id := f.started[i]
		for time.Now().Before(deadline) {
			d, err := f.temporal.DescribeWorkflowExecution(ctx, api.DeployWorkflowID(id), "")
			if err != nil || d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		_ = f.dyn.Resource(crds.Leases).Delete(ctx, id, metav1.DeleteOptions{})
		return nil
	})
	_ = f.worker.Process.Signal(syscall.SIGTERM)
	_ = f.worker.Wait()
}

func percentiles(rs []deployResult) (p50, p99 time.Duration, errs int) {
	var ok []time.Duration
	for _, r := range rs {
		if r.err != nil {
			errs++
			fmt.Fprintf(os.Stderr, "fleet: lease %s: %v\n", r.lease, r.err)
			continue
		}
		ok = append(ok, r.took)
	}
	if len(ok) == 0 {
		return 0, 0, errs
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i] < ok[j] })
	at := func(q float64) time.Duration { return ok[min(len(ok)-1, int(q*float64(len(ok))))] }
	return at(0.50), at(0.99), errs
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

// machine says what the numbers were measured on.
func machine() string {
	cpu := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
				break
			}
		}
	}
	var si syscall.Sysinfo_t
	mem := 0.0
	if syscall.Sysinfo(&si) == nil {
		mem = float64(si.Totalram) * float64(si.Unit) / (1 << 30)
	}
	return fmt.Sprintf("%d cores (%s), %.0f GiB", runtime.NumCPU(), cpu, mem)
}

// temporalShape says which Temporal the numbers were measured on, and
// the controller-managers' client rate limit.
func temporalShape(s *devstack.Stack) string {
	shape := "Temporal CLI dev server (SQLite in WAL mode, 1 history shard)"
	if s.TemporalMode == devstack.ModePostgres {
		shape = fmt.Sprintf("Temporal server on PostgreSQL, %d history shards", s.HistoryShards)
	}
	limit := "kube-controller-manager's default client limit (20/s, burst 30)"
	if q := os.Getenv(devstack.KCMAPIQPSEnv); q != "" {
		limit = "kube-controller-manager's client limit lifted to " + q + "/s (" + devstack.KCMAPIQPSEnv + ")"
	}
	return shape + "; " + limit
}
