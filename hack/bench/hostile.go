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

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/workflows"
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
		return f.startRefused(ctx, workflows.DeployWorkflowID(id), in)
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
		return f.updateRefused(ctx, victim, workflows.UpdateDeploy, in)
	}},
	{"a scale to 500 replicas (the operator allows 64)", func(ctx context.Context, f *fleet, i int, leases []string) (bool, error) {
		victim := leases[i%len(leases)]
		return f.updateRefused(ctx, victim, workflows.UpdateScaleService, json.RawMessage(`{"service": "web", "replicas": 500}`))
	}},
	{"an observation saying the lease closed", func(ctx context.Context, f *fleet, i int, leases []string) (bool, error) {
		victim := leases[i%len(leases)]
		h, err := f.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: workflows.DeployWorkflowID(victim),
			UpdateName: workflows.UpdateObserve, WaitForStage: client.WorkflowUpdateStageCompleted,
			Args: []any{json.RawMessage(`{"lease": "` + victim + `", "closed": true}`)}})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		_ = err // taken or refused, the lease must stay up
		st, err := f.status(ctx, victim)
		if err != nil {
			return false, err
		}
		return st.Phase == workflows.PhaseActive, nil
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
	h, err := f.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: workflows.DeployWorkflowID(leaseID),
		UpdateName: name, WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{arg}})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return err != nil, nil
}

// hostileShare deploys n leases on a quiet worker, then n more while the
// hostile inputs go at the first n, and prints both side by side.
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
	rss1 := f.rss()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	sent := make([]int, len(hostileInputs))
	notHeld := make([]int, len(hostileInputs))
	var sendErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			if i%len(hostileInputs) == 0 && i > 0 { // whole rounds: every kind is sent
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
		}
	}()
	c2 := meter.read()
	loud, err := f.deployAll(ctx, n, 0)
	close(stop)
	wg.Wait()
	c3 := meter.read()
	if err != nil {
		return err
	}
	if sendErr != nil {
		return sendErr
	}
	rss2 := f.rss()
	down := 0
	for _, id := range targets {
		if st, err := f.status(ctx, id); err != nil || st.Phase != workflows.PhaseActive {
			down++
		}
	}

	qp50, qp99, qerrs := percentiles(quiet.results)
	lp50, lp99, lerrs := percentiles(loud.results)
	fmt.Fprintf(out, "\nhostile inputs sent to the worker during %d concurrent deploys of other leases (issue 35), side by side with the same deploys on a quiet worker:\n", n)
	// Where the inputs' cost lands: the worker's CPU, and the Temporal
	// server's and the API server's, over each batch's own window (one
	// machine: what one takes, the deploys wait for).
	quietCPU, loudCPU := cpuDelta(c0, c1), cpuDelta(c2, c3)
	fmt.Fprintf(out, "%-28s %10s %10s %8s %14s %12s %14s %14s\n", "", "p50", "p99", "errors", "worker RSS MiB", "worker CPU s", "Temporal CPU s", "apiserver CPU s")
	row := func(name string, p50, p99 time.Duration, errs int, rss float64, cpu map[string]float64) {
		fmt.Fprintf(out, "%-28s %10s %10s %8d %14.1f %12.2f %14.2f %14.2f\n", name, round(p50), round(p99), errs, rss,
			cpu["worker"], cpu[devstack.Temporal], cpu[devstack.APIServer])
	}
	row("quiet", qp50, qp99, qerrs, rss1, quietCPU)
	row("with hostile inputs", lp50, lp99, lerrs, rss2, loudCPU)
	fmt.Fprintf(out, "%-28s %10.2f %10.2f %8s %14.2f (%.1f MiB before the quiet deploys)\n", "ratio", float64(lp50)/float64(qp50), float64(lp99)/float64(qp99), "", rss2/rss1, rss0)
	for k, h := range hostileInputs {
		fmt.Fprintf(out, "  %-72s sent %3d, not refused (or lease not kept up) %d\n", h.name, sent[k], notHeld[k])
	}
	fmt.Fprintf(out, "  %-72s %d of %d\n", "targeted leases not Active afterwards", down, len(targets))
	if err := syscall.Kill(f.worker.Process.Pid, 0); err != nil {
		fmt.Fprintf(out, "  the worker died: %v\n", err)
	}
	return nil
}

// rss is the worker's resident set now, in MiB.
func (f *fleet) rss() float64 { return f.procStatusMiB("VmRSS:") }
