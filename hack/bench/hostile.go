package main

// Hostile inputs beside a fleet (issue 35): the same concurrent deploys,
// once on a quiet worker and once while hand-typed hostile inputs reach it
// all the while, side by side: the deploys' times, the worker's memory,
// and whether every hostile input was refused (or, for a forged "lease
// closed" observation, taken as the hint it is: the lease stays up). The
// hostile-tenant suite (workflows/hostile_integration_test.go) asserts
// what each input gets; this measures what they cost the other leases.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
)

// hostileInput is one kind of hand-typed input an attacker sends.
type hostileInput struct {
	name string
	// send sends it at the given leases (deployed, Active) and reports
	// whether the worker did what it must (refused it, or kept the lease
	// up); err is a failure to send at all.
	send func(ctx context.Context, f *fleet, i int, leases []string) (held bool, err error)
}

var hostileInputs = []hostileInput{
	{"a start whose condition is 200,000 '!' (it overflowed the worker's stack)", func(ctx context.Context, f *fleet, i int, _ []string) (bool, error) {
		id := fmt.Sprintf("%s-hostile-%d", f.prefix, i)
		in := json.RawMessage(`{"manifest": {"lease": "` + id + `", "services": [{"name": "web", "image": "nginx:1.27",` +
			` "rollout": {"strategy": "Canary", "steps": [{"setWeight": 50}], "analysis": {"prometheus": {"query": "vector(1)"},` +
			` "successCondition": "` + strings.Repeat("!", 200000) + `true"}}}]}}`)
		return f.startRefused(ctx, api.DeployWorkflowID(id), in)
	}},
	{"a start for another lease, under another ID", func(ctx context.Context, f *fleet, i int, leases []string) (bool, error) {
		victim := leases[i%len(leases)]
		in := json.RawMessage(`{"manifest": {"lease": "` + victim + `", "services": [{"name": "web", "image": "nginx:1.28", "replicas": 1}]}}`)
		return f.startRefused(ctx, fmt.Sprintf("%s-foreign-%d", f.prefix, i), in)
	}},
	{"a deploy update with a 200 KB plan fingerprint", func(ctx context.Context, f *fleet, i int, leases []string) (bool, error) {
		victim := leases[i%len(leases)]
		in := json.RawMessage(`{"manifest": {"lease": "` + victim + `", "services": [{"name": "web", "image": "nginx:1.28", "replicas": 1}]},` +
			` "planFingerprint": "` + strings.Repeat("f", 200<<10) + `"}`)
		return f.updateRefused(ctx, victim, api.UpdateDeploy, in)
	}},
	{"a scale to 500 replicas (the operator allows 64)", func(ctx context.Context, f *fleet, i int, leases []string) (bool, error) {
		victim := leases[i%len(leases)]
		return f.updateRefused(ctx, victim, api.UpdateScale, json.RawMessage(`{"service": "web", "replicas": 500}`))
	}},
	{"an observation saying the lease closed", func(ctx context.Context, f *fleet, i int, leases []string) (bool, error) {
		victim := leases[i%len(leases)]
		h, err := f.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: api.DeployWorkflowID(victim),
			UpdateName: api.UpdateObserve, WaitForStage: client.WorkflowUpdateStageCompleted,
			Args: []any{json.RawMessage(`{"lease": "` + victim + `", "closed": true}`)}})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		_ = err // taken or refused, the lease must stay up
		st, err := f.statusAgain(ctx, victim)
		if err != nil {
			return false, err
		}
		return st.Phase == api.PhaseActive, nil
	}},
}

// startRefused starts DeployWorkflow by name with a raw input, as typed
// by hand, and reports whether it ended refused.
func (f *fleet) startRefused(ctx context.Context, id string, in json.RawMessage) (bool, error) {
	run, err := f.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: f.tq}, "DeployWorkflow", in)
	if err != nil {
		return false, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return run.Get(wctx, nil) != nil && wctx.Err() == nil, nil
}

// updateRefused sends a lease's workflow an update by name with a raw
// argument and reports whether it was refused.
func (f *fleet) updateRefused(ctx context.Context, leaseID, name string, arg json.RawMessage) (bool, error) {
	h, err := f.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: api.DeployWorkflowID(leaseID),
		UpdateName: name, WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{arg}})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return err != nil, nil
}

// hostileShare deploys n leases on a quiet worker, then n more while the
// hostile inputs go at the first n at a paced rate (hostilePace apart, as
// a Temporal namespace's rate limit would let them through), then n more
// while they go flat out, then n more quiet again (the machine's noise),
// and prints the four side by side.
func (f *fleet) hostileShare(ctx context.Context, meter cpuMeter, n int) error {
	rss0 := f.rss()
	c0 := meter.read()
	quiet, err := f.deployAll(ctx, n, 0)
	if err != nil {
		return err
	}
	c1 := meter.read()
	targets := make([]string, 0, n)
	for _, r := range quiet.results {
		if r.err == nil {
			targets = append(targets, r.lease)
		}
	}
	if len(targets) == 0 {
		return fmt.Errorf("hostile inputs: none of the %d quiet deploys succeeded", n)
	}
	quietRow := hostileRow{name: "quiet", b: quiet, rss: f.rss(), cpu: cpuDelta(c0, c1)}
	sent := make([]int, len(hostileInputs))
	notHeld := make([]int, len(hostileInputs))
	paced, err := f.hostileBatch(ctx, meter, n, targets, hostilePace, sent, notHeld)
	if err != nil {
		return err
	}
	paced.name = fmt.Sprintf("one input every %s", hostilePace)
	flat, err := f.hostileBatch(ctx, meter, n, targets, 0, sent, notHeld)
	if err != nil {
		return err
	}
	flat.name = "inputs flat out"
	// The same deploys quiet again: how much two quiet batches differ
	// is what the machine's noise is.
	c2 := meter.read()
	again, err := f.deployAll(ctx, n, 0)
	if err != nil {
		return err
	}
	againRow := hostileRow{name: "quiet again", b: again, rss: f.rss(), cpu: cpuDelta(c2, meter.read())}
	down := 0
	for _, id := range targets {
		if st, err := f.statusAgain(ctx, id); err != nil || st.Phase != api.PhaseActive {
			down++
		}
	}

	fmt.Fprintf(out, "\nhostile inputs sent to the worker during %d concurrent deploys of other leases (issue 35), side by side with the same deploys on a quiet worker:\n", n)
	// Where the inputs' cost lands: the worker's CPU, and the Temporal
	// server's and the API server's, over each batch's own window (one
	// machine: what one takes, the deploys wait for).
	fmt.Fprintf(out, "%-28s %10s %10s %8s %8s %14s %12s %14s %14s\n", "", "p50", "p99", "p99/quiet", "errors", "worker RSS MiB", "worker CPU s", "Temporal CPU s", "apiserver CPU s")
	_, qp99, _ := percentiles(quiet.results)
	for _, r := range []hostileRow{quietRow, paced, flat, againRow} {
		p50, p99, errs := percentiles(r.b.results)
		fmt.Fprintf(out, "%-28s %10s %10s %8.2f %8d %14.1f %12.2f %14.2f %14.2f\n", r.name, round(p50), round(p99), float64(p99)/float64(qp99), errs, r.rss,
			r.cpu["worker"], r.cpu[devstack.Temporal], r.cpu[devstack.APIServer])
	}
	fmt.Fprintf(out, "  (worker RSS %.1f MiB before the quiet deploys)\n", rss0)
	for k, h := range hostileInputs {
		fmt.Fprintf(out, "  %-72s sent %3d, not refused (or lease not kept up) %d\n", h.name, sent[k], notHeld[k])
	}
	fmt.Fprintf(out, "  %-72s %d of %d\n", "targeted leases not Active afterwards", down, len(targets))
	if err := syscall.Kill(f.worker.Process.Pid, 0); err != nil {
		fmt.Fprintf(out, "  the worker died: %v\n", err)
	}
	return nil
}

// hostilePace is the paced batch's gap between two hostile inputs.
const hostilePace = 500 * time.Millisecond

// hostileRow is one batch's line of the table.
type hostileRow struct {
	name string
	b    batch
	rss  float64
	cpu  map[string]float64
}

// hostileBatch deploys n leases while the hostile inputs go at targets,
// pace apart (0: flat out, each as soon as the last was answered), in
// whole rounds (every kind is sent), counting into sent and notHeld.
func (f *fleet) hostileBatch(ctx context.Context, meter cpuMeter, n int, targets []string, pace time.Duration, sent, notHeld []int) (hostileRow, error) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sendErr error
	base := 0 // the inputs' names go on from the last batch's
	for _, n := range sent {
		base += n
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := base; ; i++ {
			if (i-base)%len(hostileInputs) == 0 && i > base {
				select {
				case <-stop:
					return
				default:
				}
			}
			k := i % len(hostileInputs)
			held, err := hostileInputs[k].send(ctx, f, i, targets)
			if err != nil {
				sendErr = fmt.Errorf("%s: %w", hostileInputs[k].name, err)
				return
			}
			sent[k]++
			if !held {
				notHeld[k]++
			}
			time.Sleep(pace)
		}
	}()
	c0 := meter.read()
	b, err := f.deployAll(ctx, n, 0)
	close(stop)
	wg.Wait()
	c1 := meter.read()
	if err == nil {
		err = sendErr
	}
	return hostileRow{b: b, rss: f.rss(), cpu: cpuDelta(c0, c1)}, err
}

// rss is the worker's resident set now, in MiB.
func (f *fleet) rss() float64 { return f.procStatusMiB("VmRSS:") }
