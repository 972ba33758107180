package main

// The scale mode (issue 40.4, make bench-scale): many idle leases on
// several workers, held for a long while. It measures what a fleet that
// size costs at rest (each worker's resident memory, at rest and over the
// hold; Temporal events and apiserver requests per lease-hour), how fast a
// burst of changes reaches the leases' workflows (change to observation,
// read from each workflow's history: when Temporal accepted the "observe"
// update, after the change was made), with all the workers and then with
// one, and a new deploy's time with the fleet present against its time
// on the empty stack.

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/k8s/kube"
)

// scaleLeases (-scale) turns on the scale mode, with that many idle
// leases; the other scale knobs are its flags too.
var (
	scaleLeases  = 0
	scaleWorkers = 3
	scaleHold    = time.Hour
	scaleBurst   = 500
	scaleSample  = time.Minute
	// scaleInFlight is how many of the leases' first deploys are under
	// way at once while the fleet is created. 100: at 500 leases on three
	// workers (PostgreSQL, 2 cores) 50 and 100 at once created 172 and
	// 174 a minute, 250 at once 127: each deploy's first workflow task
	// (its batched Kubernetes calls) queued at the API server past the
	// SDK's 8 s task heartbeat, each heartbeat one more task and three
	// more events (2,700 first tasks over 5 s on the three workers at
	// 250; 1,000 at 100), and some past the 10 s task timeout, redone.
	scaleInFlight = 100
	// scaleLeaveLeases skips closing the leases at the end: a stack about
	// to be torn down takes them with it (closing 500 one by one took 10
	// minutes; 20,000 would take hours).
	scaleLeaveLeases bool
	// scaleStatePath (-scale-state) makes the fleet's creation resumable
	// (scale_state.go); scaleCreateFor (-scale-create-for) bounds one
	// invocation's part of it.
	scaleStatePath string
	scaleCreateFor time.Duration
)

// worker is one worker process of the scale mode.
type scaleWorker struct {
	cmd  *exec.Cmd
	addr string
}

func runScale(ctx context.Context, s *devstack.Stack, tc client.Client, dyn dynamic.Interface) error {
	f := &fleet{stack: s, temporal: tc, leases: lease.NewKubeStore(dyn), dyn: dyn,
		tq: fmt.Sprintf("bench-scale-%d", time.Now().UnixNano()), prefix: fmt.Sprintf("bs%x", time.Now().Unix()%0xffff)}
	var state *scaleState
	if scaleStatePath != "" {
		st, err := loadScaleState(scaleStatePath)
		if err != nil {
			return err
		}
		if st == nil {
			st = &scaleState{Prefix: f.prefix, TaskQueue: f.tq}
		} else {
			if st.Leases > 0 && st.SoloEmpty == 0 {
				return fmt.Errorf("-scale-state %s: %d leases but no deploy time on the empty stack to compare with; remove it (and bring the stack down) to start a new fleet", scaleStatePath, st.Leases)
			}
			// The stack is the one the fleet was created on: down
			// without --keep-data, or another run directory, has none
			// of it.
			if st.Leases > 0 {
				if _, err := f.leases.Get(ctx, fmt.Sprintf("%s-%d", st.Prefix, st.Leases-1)); err != nil {
					return fmt.Errorf("-scale-state %s: its fleet is not on this stack (lease %s-%d: %v): was the stack brought down without --keep-data, or up with another %s? Remove the file to start a new fleet",
						scaleStatePath, st.Prefix, st.Leases-1, err, devstack.RunDirEnv)
				}
			}
			f.prefix, f.tq = st.Prefix, st.TaskQueue
			for i := range st.Leases {
				f.started = append(f.started, fmt.Sprintf("%s-%d", f.prefix, i))
			}
			fmt.Fprintf(out, "scale: going on with the fleet of %s: %d leases on task queue %s\n", scaleStatePath, st.Leases, st.TaskQueue)
		}
		state = st
		// The fleet outlives this invocation.
		scaleLeaveLeases = true
	}
	if err := f.startWorker(); err != nil {
		return err
	}
	defer func() {
		if !scaleLeaveLeases {
			f.cleanup(ctx)
			return
		}
		if state != nil {
			fmt.Fprintf(out, "scale: %d leases left in place, the fleet of %s\n", len(f.started), scaleStatePath)
		} else {
			fmt.Fprintf(out, "scale: %d leases left in place for the stack's teardown\n", len(f.started))
		}
		stopWorker(f.worker)
	}()
	workers := []scaleWorker{{cmd: f.worker, addr: f.addr}}
	defer func() {
		for _, w := range workers[1:] {
			stopWorker(w.cmd)
		}
	}()
	for len(workers) < scaleWorkers {
		cmd, addr, err := f.spawnWorker(fmt.Sprintf("bench-scale-%d", len(workers)))
		if err != nil {
			return err
		}
		workers = append(workers, scaleWorker{cmd: cmd, addr: addr})
	}
	addrs := func() []string {
		var a []string
		for _, w := range workers {
			a = append(a, w.addr)
		}
		return a
	}
	for _, a := range addrs() {
		if err := waitMetric(a, "deployflow_observer_members", len(workers), time.Minute); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nscale: %d idle leases on %d workers (the worker binary, one task queue; one-service leases, 1 replica, one hostname); %s; machine: %s\n\n",
		scaleLeases, len(workers), temporalShape(s), machine())

	// A deploy on the empty stack, the reference for the one below (a
	// resumed fleet's first invocation measured it).
	var soloEmpty time.Duration
	if state != nil && state.SoloEmpty > 0 {
		soloEmpty = state.SoloEmpty
	} else {
		d, err := f.soloDeploy(ctx)
		if err != nil {
			return fmt.Errorf("solo deploy on the empty stack: %w", err)
		}
		soloEmpty = d
		if state != nil {
			state.SoloEmpty, state.Leases = d, len(f.started)
			if err := state.save(scaleStatePath); err != nil {
				return err
			}
		}
	}

	// The leases, by deploys (a lease's workflow is only ever started by
	// one), scaleInFlight under way at any time: the way a fleet gets
	// there, only faster. (In batches each waiting for its slowest deploy,
	// 2,000 took 17m12s on PostgreSQL, 116 a minute; so, 500 took 3m57s,
	// 127 a minute: docs/performance.md.)
	created := time.Now()
	var (
		mu     sync.Mutex
		done   int
		failed int
	)
	ids := make([]string, max(scaleLeases-len(f.started), 0))
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", f.prefix, len(f.started)+i)
	}
	// -scale-create-for: no deploy starts past it; those under way end.
	over := func() bool { return scaleCreateFor > 0 && time.Since(created) > scaleCreateFor }
	launched, _ := forEachUntil(len(ids), scaleInFlight, over, func(i int) error {
		r := deployResult{lease: ids[i]}
		if _, err := f.leases.Create(ctx, ids[i], "bench"); err != nil {
			r.err = err
		} else {
			r = f.deploy(ctx, ids[i], 0)
		}
		mu.Lock()
		defer mu.Unlock()
		done++
		if r.err != nil {
			if failed < 5 {
				fmt.Fprintf(out, "scale: lease %s did not deploy: %v\n", r.lease, r.err)
			}
			failed++
		}
		if done%1000 == 0 || done == len(ids) {
			fmt.Fprintf(out, "scale: %d leases deployed in %s (%.0f a minute), %d failed\n", done, round(time.Since(created)), float64(done)/time.Since(created).Minutes(), failed)
		}
		return nil
	})
	createdIn := time.Since(created)
	ids = ids[:launched]
	f.started = append(f.started, ids...)
	leases := len(f.started)
	// Each figure is printed once measured: a late failure (the bursts
	// come after an hour's hold) keeps what came before.
	if state == nil {
		fmt.Fprintf(out, "%-28s %d leases by deploys, %d under way at a time, in %s (%.0f a minute); %d failed\n", "created", leases, scaleInFlight,
			round(createdIn), float64(len(ids))/createdIn.Minutes(), failed)
	} else {
		state.Leases, state.Failed = leases, state.Failed+failed
		state.Segments = append(state.Segments, scaleSegment{Start: created, Leases: len(ids), Took: createdIn})
		if err := state.save(scaleStatePath); err != nil {
			return err
		}
		n, took := state.created()
		parts := ""
		if len(state.Segments) > 1 {
			parts = fmt.Sprintf(" over %d invocations", len(state.Segments))
		}
		fmt.Fprintf(out, "%-28s %d leases by deploys, %d under way at a time, in %s%s (%.0f a minute; this invocation %d in %s, %.0f a minute); %d failed\n",
			"created", leases, scaleInFlight, round(took), parts, float64(n)/took.Minutes(),
			len(ids), round(createdIn), float64(len(ids))/createdIn.Minutes(), state.Failed)
		if leases < scaleLeases {
			fmt.Fprintf(out, "scale: %d of %d leases; the rest on the next run with -scale-state %s on this stack, brought down keeping its data (make bench-scale SCALE_STATE=... does both)\n",
				leases, scaleLeases, scaleStatePath)
			return nil
		}
	}
	// The observers settle: nothing sent for 10 s.
	if err := waitQuiet(addrs(), total(sendsByResult(addrs())), 0, 10*time.Second, 10*time.Minute); err != nil {
		return err
	}
	soloFull, err := f.soloDeploy(ctx)
	if state != nil {
		// Its lease is the fleet's too: a later invocation goes on after it.
		state.Leases = len(f.started)
		if err := state.save(scaleStatePath); err != nil {
			return err
		}
	}
	if err != nil {
		return fmt.Errorf("solo deploy with %d leases present: %w", leases, err)
	}
	fmt.Fprintf(out, "%-28s %s on the empty stack, %s with %d leases present: %.2fx (target <= 1.2x)\n", "solo deploy, to Active",
		round(soloEmpty), round(soloFull), leases, float64(soloFull)/float64(soloEmpty))

	// At rest, then over the hold: each worker's resident memory, and what
	// the idle leases cost.
	rss := func() []float64 {
		var r []float64
		for _, w := range workers {
			r = append(r, procStatusMiB(w.cmd.Process.Pid, "VmRSS:"))
		}
		return r
	}
	mibs := func(r []float64) string {
		var s []string
		for _, m := range r {
			s = append(s, fmt.Sprintf("%.0f", m))
		}
		return strings.Join(s, " ")
	}
	before, err := f.historyLengths(ctx)
	if err != nil {
		return err
	}
	atRest := rss()
	fmt.Fprintf(out, "%-28s %s MiB resident, each worker (target <= 2048); %s workflows in their sticky caches\n", "at rest",
		mibs(atRest), stickyLine(addrs()))
	samples := [][]float64{atRest}
	from := time.Now()
	for time.Since(from) < scaleHold {
		time.Sleep(min(scaleSample, scaleHold-time.Since(from)))
		samples = append(samples, rss())
	}
	to := time.Now()
	last := samples[len(samples)-1]
	var growth []string
	peak := make([]float64, len(atRest))
	for i := range atRest {
		for _, s := range samples {
			peak[i] = max(peak[i], s[i])
		}
		growth = append(growth, fmt.Sprintf("%+.1f%%", (last[i]-atRest[i])*100/atRest[i]))
	}
	fmt.Fprintf(out, "%-28s %s MiB at its end (peaks %s): %s (target: under 5%% growth)\n", "over "+to.Sub(from).Round(time.Second).String(),
		mibs(last), mibs(peak), strings.Join(growth, " "))
	after, err := f.historyLengths(ctx)
	if err != nil {
		return err
	}
	idleReqs, membershipReqs, err := f.idleRequests(from, to)
	if err != nil {
		return err
	}
	events := 0
	for id, n := range after {
		events += n - before[id]
	}
	leaseHours := float64(len(after)) * to.Sub(from).Hours()
	fmt.Fprintf(out, "%-28s %.2f events and %.3f apiserver requests per lease-hour over %d leases (targets 0 and 0); %.0f membership renewals per worker-hour besides\n", "idle",
		float64(events)/leaseHours, float64(idleReqs)/leaseHours, len(after), float64(membershipReqs)/to.Sub(from).Hours()/float64(len(workers)))

	// The bursts: scaleBurst leases' ReplicaSets scaled to 0 by hand and
	// back, with every worker, then with one.
	kc, err := kube.NewClientset(s.Kubeconfig(), "", "deployflow-bench")
	if err != nil {
		return err
	}
	var active []string
	for _, id := range f.started {
		if len(active) == scaleBurst {
			break
		}
		if st, err := f.statusAgain(ctx, id); err == nil && st.Phase == api.PhaseActive {
			active = append(active, id)
		}
	}
	fmt.Fprintf(out, "\nbursts: %d leases' ReplicaSets scaled to 0 by hand (the changes), then back to 1; change to observation: from the scale's answer to Temporal's acceptance of the lease's observe update, from its history\n", len(active))
	fmt.Fprintf(out, "%-8s %6s %9s %6s %9s %9s %6s %11s %9s %9s %9s\n", "workers", "sent", "accepted", "known", "deferred", "rejected", "error", "sent/change", "not taken", "p50", "p99")
	for _, k := range []int{len(workers), 1} {
		for len(workers) > k {
			last := workers[len(workers)-1]
			stopWorker(last.cmd)
			workers = workers[:len(workers)-1]
		}
		if err := waitMetric(workers[0].addr, "deployflow_observer_members", k, 2*time.Minute); err != nil {
			return err
		}
		// The survivors take the leases over: each sends what it took
		// once; that settles before the burst.
		if err := waitQuiet(addrs(), total(sendsByResult(addrs())), 0, 10*time.Second, 10*time.Minute); err != nil {
			return err
		}
		b, err := burst(ctx, f, kc, addrs(), active)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%-8d %6d %9d %6d %9d %9d %6d %11.2f %9d %9s %9s\n", k, total(b.sends), b.sends[observe.SentAccepted],
			b.sends[observe.SentKnown], b.sends[observe.SentDeferred], b.sends[observe.SentRejected], b.sends[observe.SentError],
			float64(total(b.sends))/float64(max(b.changes, 1)), b.notTaken, round(b.p50), round(b.p99))
	}
	fmt.Fprintf(out, "(targets: sent/change 1.00, not taken 0, p99 under 2s)\n")
	return nil
}

// burstResult is one burst of changes: the observations the workers sent
// for them, by result, and how long each change took to reach its lease's
// workflow.
type burstResult struct {
	changes, notTaken int
	sends             map[string]int
	p50, p99          time.Duration
}

// burst scales each lease's web ReplicaSets to 0 (one change each),
// waits until the observers are quiet, reads from each lease's history
// when its workflow accepted the observation, and scales them back (not
// measured: the pods' start is the cluster's).
func burst(ctx context.Context, f *fleet, kc kubernetes.Interface, addrs []string, leases []string) (burstResult, error) {
	res := burstResult{changes: len(leases)}
	start := sendsByResult(addrs)
	changes := make([]change, len(leases))
	errs := forEach(len(leases), 16, func(i int) error {
		changes[i].asked = time.Now()
		err := scaleService(ctx, kc, leases[i], 0)
		changes[i].answered = time.Now()
		return err
	})
	if errs != nil {
		return res, errs
	}
	if err := waitQuiet(addrs, total(start), len(leases), 5*time.Second, 10*time.Minute); err != nil {
		return res, err
	}
	res.sends = diffSends(start, sendsByResult(addrs))
	took := make([]time.Duration, len(leases))
	if err := forEach(len(leases), 16, func(i int) error {
		var err error
		took[i], err = f.tookToObserve(ctx, leases[i], changes[i])
		return err
	}); err != nil {
		return res, err
	}
	var seen []time.Duration
	for _, d := range took {
		if d < 0 {
			res.notTaken++
			continue
		}
		seen = append(seen, d)
	}
	sort.Slice(seen, func(i, j int) bool { return seen[i] < seen[j] })
	if len(seen) > 0 {
		res.p50, res.p99 = seen[len(seen)/2], seen[min(len(seen)-1, len(seen)*99/100)]
	}
	// Back to 1, and settled, for the next burst.
	base := total(sendsByResult(addrs))
	if err := forEach(len(leases), 16, func(i int) error { return scaleService(ctx, kc, leases[i], 1) }); err != nil {
		return res, err
	}
	if err := waitScaled(ctx, kc, leases, 1, 10*time.Minute); err != nil {
		return res, err
	}
	return res, waitQuiet(addrs, base, len(leases), 5*time.Second, 10*time.Minute)
}

// change is one change made by hand: when it was asked of the API server
// and when the answer came back.
type change struct{ asked, answered time.Time }

// tookToObserve is how long the lease's workflow took to accept an
// observation of the change, from the API server's answer (0 when it
// accepted one before the answer reached the bench); -1 when it has not.
// The observation is looked for from the moment the change was asked: a
// worker's observer can see it and Temporal accept it before a loaded
// bench reads its own answer (the slice in the project's CI on b256e1f:
// 1 of 3 changes counted "not taken" where all 3 were accepted).
func (f *fleet) tookToObserve(ctx context.Context, lease string, c change) (time.Duration, error) {
	at, err := f.observedAfter(ctx, lease, c.asked)
	if err != nil || at.IsZero() {
		return -1, err
	}
	return max(at.Sub(c.answered), 0), nil
}

// observedAfter is when the lease's workflow first accepted an observe
// update after t; zero if it has none. The run that took it may have
// continued as new since (18 of 500 leases' had, at 500 leases on
// PostgreSQL): runs that started after t are read back to the one under
// way at t.
func (f *fleet) observedAfter(ctx context.Context, id string, t time.Time) (time.Time, error) {
	return f.observedInRunAfter(ctx, id, "", t)
}

func (f *fleet) observedInRunAfter(ctx context.Context, id, run string, t time.Time) (time.Time, error) {
	var found, startedAt time.Time
	previous := ""
	it := f.temporal.GetWorkflowHistory(ctx, api.DeployWorkflowID(id), run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return time.Time{}, err
		}
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			startedAt, previous = ev.GetEventTime().AsTime(), a.GetContinuedExecutionRunId()
		}
		a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes()
		if a == nil || a.GetAcceptedRequest().GetInput().GetName() != api.UpdateObserve {
			continue
		}
		if at := ev.GetEventTime().AsTime(); !at.Before(t) && found.IsZero() {
			found = at
		}
	}
	if previous == "" || startedAt.Before(t) {
		return found, nil
	}
	// This run started after t: an earlier one may have taken it first.
	earlier, err := f.observedInRunAfter(ctx, id, previous, t)
	if err != nil || !earlier.IsZero() {
		return earlier, err
	}
	return found, nil
}

// soloDeploy deploys one lease and returns its time to Active.
func (f *fleet) soloDeploy(ctx context.Context) (time.Duration, error) {
	b, err := f.deployAll(ctx, 1, 0)
	if err != nil {
		return 0, err
	}
	return b.results[0].took, b.results[0].err
}

// stickyLine is each worker's workflows in its sticky cache.
func stickyLine(addrs []string) string {
	var s []string
	for _, a := range addrs {
		s = append(s, stickyCached(a))
	}
	return strings.Join(s, " ")
}

// stopWorker stops a worker as its platform would (SIGTERM), and waits.
func stopWorker(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

// forEach runs do(0..n-1) on at most par goroutines; the first error.
func forEach(n, par int, do func(i int) error) error {
	_, err := forEachUntil(n, par, func() bool { return false }, do)
	return err
}

// forEachUntil is forEach that starts no do(i) once stop is true: it
// returns how many it started (do(0) to do(started-1), each run to its
// end) and the first error.
func forEachUntil(n, par int, stop func() bool, do func(i int) error) (started int, err error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, par)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		if stop() {
			<-sem
			break
		}
		started++
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := do(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return started, first
}
