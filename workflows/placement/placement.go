package placement

import (
	"errors"
	"fmt"
	"strconv"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// A placement (issue 23.3, 23.4): one lease's manifest rolled out across
// clusters in waves, one durable workflow over all of them. Each cluster's
// deploy is today's deploy, by the lease's workflow of that cluster
// (DeployWorkflowIDIn); this workflow only sequences them: a wave's
// clusters deploy in parallel, the next wave starts when every cluster of
// this one is healthy and its gate (pause, analysis) passed. A failed
// cluster, a failed gate or an abort returns every cluster that already
// moved to its last-known-good manifest, in reverse wave order; the waves
// after it are never touched.

// checkPlacementID refuses a placement started under another ID than its
// lease's: a second one would deploy the same lease beside the first.
func checkPlacementID(ctx workflow.Context, lease string) error {
	info := workflow.GetInfo(ctx)
	id := info.WorkflowExecution.ID
	if id == api.PlacementWorkflowID(lease) || (id == flow.ReplayerWorkflowID && workflow.IsReplaying(ctx)) {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"workflow ID: lease %s's placement runs as workflow %s, not %s (one placement per lease at a time): start it with that ID, or with 'deployflow deploy'",
		lease, api.PlacementWorkflowID(lease), id), api.ErrInvalidInput, nil)
}

func (p *placementRun) mark(op plan.Op, target string, s plan.State, err error) {
	if n := p.st.Tree.Search(op, target); n != nil {
		flow.SetState(n, s, err)
	}
}

type placementRun struct {
	ctx      workflow.Context
	in       api.PlacementInput
	st       api.PlacementStatus
	previous map[string]*manifest.Manifest // each cluster's last-known-good at the start
	moved    map[string]bool               // clusters whose deploy of the manifest succeeded
	// interrupted are the clusters whose deploy was in flight when the
	// placement stopped (interrupts).
	interrupted map[string]bool
	abort       bool
	promote     bool
	self        string // the worker's own cluster's name (ListClusters' first)
	jobs        int    // analysis Jobs run so far, for their names
}

// PlacementWorkflow deploys a lease's manifest to the clusters of its
// placement, wave by wave.
func PlacementWorkflow(ctx workflow.Context, in api.PlacementInput) (*api.PlacementStatus, error) {
	if in.Invalid() != nil {
		return nil, temporal.NewNonRetryableApplicationError(in.Invalid().Error(), api.InputErrorType(in.Invalid(), "manifest"), nil)
	}
	if err := api.CheckTrigger("trigger", in.Trigger); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidInput, nil)
	}
	m := &in.Manifest
	if m.Placement == nil {
		return nil, temporal.NewNonRetryableApplicationError("manifest.placement: missing: a placement workflow deploys a manifest with a placement; without one, deploy to the lease's workflow", api.ErrInvalidManifest, nil)
	}
	if err := validatePlacement(ctx, m); err != nil {
		return nil, err
	}
	if err := checkPlacementID(ctx, m.Lease); err != nil {
		return nil, err
	}
	p := &placementRun{ctx: ctx, in: in, previous: map[string]*manifest.Manifest{}, moved: map[string]bool{},
		interrupted: map[string]bool{}}
	p.st = api.PlacementStatus{Lease: m.Lease, Phase: api.PlacementDeploying, Tree: api.PlacementTree(m)}
	for _, w := range m.Placement.Waves {
		ws := api.WaveStatus{Phase: api.WaveWaiting}
		for _, c := range w.Clusters {
			ws.Clusters = append(ws.Clusters, api.ClusterStatus{Cluster: c, Phase: api.ClusterWaiting})
		}
		p.st.Waves = append(p.st.Waves, ws)
	}
	if err := p.registerControls(); err != nil {
		return nil, err
	}
	if err := p.checkClusters(); err != nil {
		return nil, err
	}

	for i := range m.Placement.Waves {
		if err := p.deployWave(i); err != nil {
			phase := api.PlacementFailed
			if errors.Is(err, errAborted) {
				phase = api.PlacementAborted
			}
			return p.fail(i, phase, err)
		}
		if err := p.passGate(i); err != nil || p.abort { // an abort during the wave's deploys too
			phase := api.PlacementFailed
			if p.abort {
				phase, err = api.PlacementAborted, errAborted
			}
			return p.fail(i, phase, err)
		}
		p.st.Waves[i].Phase = api.WaveHealthy
		p.mark(plan.OpWave, plan.WaveTarget(i), plan.Done, nil)
	}
	p.st.Phase = api.PlacementSucceeded
	flow.SetState(p.st.Tree, plan.Done, nil)
	return &p.st, nil
}

// validatePlacement refuses an invalid manifest. It validates once and
// records the verdict, so a later build's stricter rules never fail a
// placement that runs, on replay.
func validatePlacement(ctx workflow.Context, m *manifest.Manifest) error {
	var invalid string
	if err := workflow.SideEffect(ctx, func(workflow.Context) any {
		if err := m.Validate(); err != nil {
			return err.Error()
		}
		return ""
	}).Get(&invalid); err != nil {
		return err
	}
	if invalid != "" {
		return temporal.NewNonRetryableApplicationError(invalid, api.ErrInvalidManifest, nil)
	}
	return nil
}

func (p *placementRun) registerControls() error {
	if err := workflow.SetQueryHandlerWithOptions(p.ctx, api.QueryStatus, func() (api.PlacementStatus, error) { return p.st, nil },
		workflow.QueryHandlerOptions{Description: "The placement's waves and each cluster's deploy"}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(p.ctx, api.UpdateAbort, func(workflow.Context) (api.PlacementStatus, error) {
		p.abort = true
		return p.st, nil
	}, workflow.UpdateHandlerOptions{Description: "Stop the placement and return every cluster that moved to its last-known-good manifest, in reverse wave order"}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(p.ctx, api.UpdatePromote, func(workflow.Context) (api.PlacementStatus, error) {
		p.promote = true
		return p.st, nil
	}, workflow.UpdateHandlerOptions{
		Description: "Go on past a wave held for approval, or whose analysis was inconclusive",
		Validator: func(workflow.Context) error {
			for _, w := range p.st.Waves {
				if w.Phase == api.WaveHeld {
					return nil
				}
			}
			return errors.New("no wave is held: promote goes on past a wave awaiting approval or whose analysis was inconclusive")
		},
	})
}

// checkClusters refuses a placement naming a cluster the worker does not
// know, before anything is deployed.
func (p *placementRun) checkClusters() error {
	var known []string
	ctx := flow.ClusterListCall(p.ctx)
	if err := workflow.ExecuteLocalActivity(ctx, api.ActivityListClusters).Get(p.ctx, &known); err != nil {
		return err
	}
	if err := p.in.Manifest.Placement.CheckClusters(known); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidManifest, nil)
	}
	if len(known) > 0 {
		p.self = known[0]
	}
	// The operator's limits, which the worker knows (a wave's analysis is
	// measured here, not by a lease workflow that would check them).
	if err := workflow.ExecuteLocalActivity(ctx, api.ActivityCheckPlacement, p.in.Manifest).Get(p.ctx, nil); err != nil {
		return temporal.NewNonRetryableApplicationError(flow.ErrorMessage(err), api.ErrInvalidManifest, nil)
	}
	return nil
}

func (p *placementRun) clusterCtx(ctx workflow.Context, summary string) workflow.Context {
	return flow.ClusterDeployCall(ctx, summary)
}

func (p *placementRun) key(wave int, cluster, what string) string {
	return "placement:" + workflow.GetInfo(p.ctx).WorkflowExecution.RunID + ":" + strconv.Itoa(wave) + ":" + cluster + ":" + what
}

// deployWave deploys the manifest to wave i's clusters in parallel and
// waits for all of them; it fails if any failed. An abort, or a cluster's
// failure, interrupts the deploys still in flight (interrupts): those
// clusters are returned with the ones that moved.
func (p *placementRun) deployWave(i int) error {
	ws := &p.st.Waves[i]
	ws.Phase = api.WaveDeploying
	flow.SetState(p.st.Tree, plan.Running, nil)
	p.mark(plan.OpWave, plan.WaveTarget(i), plan.Running, nil)
	one := p.in.Manifest.WithoutPlacement()
	var failed []string
	done := 0
	deploys, interrupt := workflow.WithCancel(p.ctx)
	stopping := false // the deploys in flight were interrupted
	started := 0      // the wave's deploys scheduled
	for j := range ws.Clusters {
		if p.abort || len(failed) > 0 {
			break // stopped while the wave started: its other clusters stay untouched
		}
		started++
		cs := &ws.Clusters[j]
		// What the cluster returns to if the placement fails: read once,
		// recorded in the history.
		var state api.ClusterState
		ctx := flow.ClusterReadCall(p.ctx)
		if err := workflow.ExecuteLocalActivity(ctx, api.ActivityReadCluster, api.ClusterRef{Lease: p.in.Manifest.Lease, Cluster: cs.Cluster}).Get(p.ctx, &state); err != nil {
			return fmt.Errorf("cluster %s: read its lease workflow: %w", cs.Cluster, err)
		}
		p.previous[cs.Cluster] = state.LastGood
		cs.Phase, cs.Started = api.ClusterDeploying, workflow.Now(p.ctx)
		p.mark(plan.OpDeployCluster, cs.Cluster, plan.Running, nil)
		f := workflow.ExecuteActivity(p.clusterCtx(deploys, "deploy to "+cs.Cluster), api.ActivityDeployToCluster,
			api.ClusterDeployInput{Cluster: cs.Cluster, Manifest: *one, Key: p.key(i, cs.Cluster, "deploy")})
		workflow.Go(p.ctx, func(gctx workflow.Context) {
			var r api.ClusterDeployResult
			err := f.Get(gctx, &r)
			cs.Finished, cs.Revision, cs.Outcome = workflow.Now(gctx), r.Revision, r.Outcome
			switch {
			case err != nil && stopping:
				// Cancelled, or failed once the cancel was asked (a timeout, an
				// error; Temporal retries nothing then): its deploy may have
				// been sent, so it is returned (guarded by its key).
				cs.Phase, cs.Outcome = api.ClusterInterrupted, "interrupted in flight: the placement stopped"
				p.interrupted[cs.Cluster] = true
			case err != nil:
				cs.Phase, cs.Outcome = api.ClusterFailed, flow.ErrorMessage(err)
				failed = append(failed, cs.Cluster)
			case !r.Succeeded:
				cs.Phase = api.ClusterFailed
				failed = append(failed, cs.Cluster)
			default:
				cs.Phase = api.ClusterActive
				p.moved[cs.Cluster] = true
			}
			if cs.Phase == api.ClusterFailed || cs.Phase == api.ClusterInterrupted {
				p.mark(plan.OpDeployCluster, cs.Cluster, plan.Failed, errors.New(cs.Outcome))
			} else {
				p.mark(plan.OpDeployCluster, cs.Cluster, plan.Done, nil)
			}
			done++
		})
	}
	if err := workflow.Await(p.ctx, func() bool { return done == started || p.abort || len(failed) > 0 }); err != nil {
		return err
	}
	if done < started {
		stopping = true
		interrupt()
	}
	if err := workflow.Await(p.ctx, func() bool { return done == started }); err != nil {
		return err
	}
	if p.abort && len(failed) == 0 {
		return errAborted
	}
	if len(failed) > 0 {
		ws.Phase = api.WaveFailed
		p.mark(plan.OpWave, plan.WaveTarget(i), plan.Failed, nil)
		return fmt.Errorf("wave %d: the deploy failed in cluster %v", i+1, failed)
	}
	return nil
}

// fail returns every cluster that moved, from wave last down to the first,
// to its last-known-good manifest, and ends the placement with phase.
func (p *placementRun) fail(last int, phase string, cause error) (*api.PlacementStatus, error) {
	p.st.Phase, p.st.Error = api.PlacementRevertingP, cause.Error()
	for i := last; i >= 0; i-- {
		ws := &p.st.Waves[i]
		done, n := 0, 0
		for j := range ws.Clusters {
			cs := &ws.Clusters[j]
			prev := p.previous[cs.Cluster]
			if !p.moved[cs.Cluster] && !p.interrupted[cs.Cluster] {
				continue // it failed, and its lease workflow returned it itself; or it never started
			}
			if prev == nil {
				cs.Reverted = "no last-known-good manifest: left at this version"
				if p.interrupted[cs.Cluster] {
					cs.Reverted = "no last-known-good manifest: its first deploy goes on"
				}
				continue
			}
			n++
			cs.Phase = api.ClusterReverting
			rn := plan.Revert(cs.Cluster)
			flow.SetState(rn, plan.Running, nil)
			p.st.Tree.Add(rn)
			f := workflow.ExecuteActivity(p.clusterCtx(p.ctx, "return "+cs.Cluster+" to its last-known-good manifest"), api.ActivityDeployToCluster,
				api.ClusterDeployInput{Cluster: cs.Cluster, Manifest: *prev, Key: p.key(i, cs.Cluster, "revert"), IfLast: p.key(i, cs.Cluster, "deploy")})
			workflow.Go(p.ctx, func(gctx workflow.Context) {
				var r api.ClusterDeployResult
				err := f.Get(gctx, &r)
				switch {
				case err != nil:
					cs.Reverted = "return failed: " + flow.ErrorMessage(err)
				case r.MovedOn:
					cs.Reverted = "not returned: deployed again since (" + r.Outcome + ")"
				case !r.Succeeded:
					cs.Reverted = fmt.Sprintf("return failed: deploy %d: %s", r.Revision, r.Outcome)
				default:
					cs.Phase, cs.Reverted = api.ClusterReverted, fmt.Sprintf("returned to the last-known-good manifest (deploy %d)", r.Revision)
				}
				if cs.Phase == api.ClusterReverted || r.MovedOn {
					flow.SetState(rn, plan.Done, nil)
				} else {
					flow.SetState(rn, plan.Failed, errors.New(cs.Reverted))
				}
				done++
			})
		}
		if err := workflow.Await(p.ctx, func() bool { return done == n }); err != nil {
			return nil, err
		}
		switch {
		case n > 0 && ws.Phase != api.WaveFailed:
			ws.Phase = api.WaveReverted
		case ws.Phase == api.WaveDeploying:
			ws.Phase = api.WaveFailed // stopped in flight, nothing to return
		}
	}
	p.st.Phase = phase
	flow.SetState(p.st.Tree, plan.Failed, cause)
	p.st.Tree.Walk(func(n *plan.Node, _ int) {
		switch n.State {
		case plan.Pending:
			flow.SetState(n, plan.Skipped, nil)
		case plan.Running:
			flow.SetState(n, plan.Failed, nil) // the wave the placement stopped in
		}
	})
	st := p.st
	return &st, temporal.NewNonRetryableApplicationError(fmt.Sprintf("placement of lease %s %s: %s", p.in.Manifest.Lease, phase, cause), api.ErrPlacement, nil, st)
}
