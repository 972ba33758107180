package lease

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// DeployWorkflow is one lease's durable deployment, the deploymentManager of
// the Akash provider rebuilt on Temporal. It deploys the manifest it starts
// with, then waits for work: a new manifest (the "deploy" update, usually
// through Update-with-Start), a teardown request, the lease closing, or the
// health monitor's timer. Each deploy checks the lease, reserves hostnames
// and IPs, applies the namespace, Services and Ingress, and rolls every
// changed service out in a child RolloutWorkflow. A failed update returns the
// lease to its last-known-good manifest; nothing running is ever deleted
// except by teardown. After each finished deploy it continues as new.
// Replaying it after a worker restart writes nothing to the cluster.
func DeployWorkflow(ctx workflow.Context, start api.DeployInput) (*api.DeployStatus, error) {
	if bad := start.Invalid(); bad != nil {
		return nil, temporal.NewNonRetryableApplicationError(bad.Error(), api.InputErrorType(bad, "manifest"), nil)
	}
	in, err := decodeDeployInput(start)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidInput, nil)
	}
	if err := validateManifest(&in.Manifest, in.Carry != nil && flow.Continued(ctx)); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidManifest, nil)
	}
	if err := flow.RefuseGuarded(in.guard(flow.Continued(ctx))); err != nil {
		return nil, err
	}
	if err := checkCluster(ctx, in); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidInput, nil)
	}
	if err := checkLeaseWorkflowID(ctx, in); err != nil {
		return nil, err
	}
	w := newDeployRun(ctx, in)
	w.Behaviour = flow.NewBehaviour(ctx, in.Carry != nil && in.Carry.FewerEvents, in.Carry != nil && in.Carry.Hardened)
	if in.Carry == nil {
		w.Pending = w.taken(w.Pending, false) // the manifest it starts with
	}
	if err := w.registerControls(); err != nil {
		return nil, err
	}
	if in.Carry != nil {
		w.publish() // a continued run shows the lease's state from its start
	}

	for {
		if w.Teardown {
			return w.tearDown()
		}
		if w.Pending != nil {
			m := w.Pending
			w.Pending = nil
			w.trigger, w.approvedPlan = w.PendingTrigger, w.PendingPlan
			w.key, w.PendingKey = w.PendingKey, ""
			w.PendingPlan = ""
			w.rollbackTo, w.PendingRollbackTo = w.PendingRollbackTo, 0
			err := w.deploy(m)
			if errors.Is(err, errTeardown) || w.Teardown {
				return w.tearDown()
			}
			if isLeaseNotActive(w.lastFailure) && w.LastGood == nil {
				w.leaseGone = true
			}
			if w.leaseGone {
				return w.end()
			}
			// One finished deploy per run keeps the history bounded.
			return w.continueAsNew()
		}
		if w.leaseGone {
			return w.end()
		}
		if w.historyFull() {
			return w.continueAsNew()
		}
		// Idle: wait for work. The worker's observer tells the workflow what
		// changes (lease-events); one slow timer checks in case it missed it.
		w.idle = true
		woken, err := workflow.AwaitWithTimeout(ctx, w.idleInterval(), func() bool {
			return w.Pending != nil || w.Teardown || w.observation != nil
		})
		w.idle = false
		if err != nil {
			return nil, err
		}
		if o := w.observation; o != nil {
			w.observation = nil
			w.takeObservation(o)
		} else if !woken {
			w.monitor()
		}
	}
}

var errTeardown = errors.New("teardown requested")

// deploy runs the deploy chain for m and, if it fails after changing
// anything, the chain again for the last-known-good manifest.
func (w *deployRun) deploy(m *manifest.Manifest) error {
	w.requested, w.taking = m, nil
	defer func() { w.requested, w.rollbackTo = nil, 0 }()
	if w.rollbackTo == 0 {
		// A rollback deploys its deploy's pod templates exactly, restarts
		// and all: that is what finds its ReplicaSets again.
		m = w.keepRestarts(m)
	}
	w.Revision++
	rec := api.DeployRecord{Revision: w.Revision, Trigger: w.trigger, Key: w.key, Started: workflow.Now(w.ctx), Image: images(m), RollbackTo: w.rollbackTo}
	w.deployStarted = rec.Started
	w.LastFailed = nil // set again if this deploy fails: retry is of the last deploy only
	before := w.Phase
	w.setPhase(api.PhaseDeploying)
	w.current = m

	res, err := w.runChain(m)
	rec.Classes = res.classes
	rec.Withheld = res.withheld
	rec.Operations = res.operations
	rec.Tree = w.endTree(err)
	switch {
	case errors.Is(err, errTeardown):
		rec.Outcome = "Interrupted by teardown"
	case errors.Is(err, errApprovalTimeout) || errors.Is(err, errStaleApproval):
		rec.Outcome = "Aborted: " + err.Error()
		w.LastError = err.Error()
		if w.Phase == api.PhaseDeploying { // aborted before anything changed
			if before == "" || before == api.PhaseDeploying {
				before = api.PhaseAborted
			}
			w.setPhase(before)
		}
	case errors.Is(err, errSuperseded):
		rec.Outcome = "Superseded by a newer manifest"
	case err == nil:
		rec.Outcome = "Succeeded"
		// The lease records what runs: the manifest as the chain deployed it,
		// with its defaults, and with what operators changed of its rollouts.
		w.LastGood, w.current, w.LastFailed = res.ran, res.ran, nil
		w.remember(w.Revision, res.ran)
		if !sameManifest(res.ran, m) {
			rec.Outcome = "Succeeded, as changed by an operator during the rollout"
		}
		if w.marksUpgradeTest() {
			rec.Outcome += " (build B)"
		}
		w.LastError, w.lastFailure = "", nil
		w.setPhase(api.PhaseActive)
	default:
		rec.Outcome = "Failed: " + flow.ErrorMessage(err)
		w.LastFailed, w.LastFailedRevision = m, w.Revision
		w.LastError = flow.ErrorMessage(err)
		w.lastFailure = err
		w.setPhase(api.PhaseFailed)
		switch {
		case res.changed && w.LastGood != nil && !sameManifest(w.LastGood, m):
			workflow.GetLogger(w.ctx).Warn("deploy failed; returning to the last-known-good manifest", "lease", m.Lease, "error", err)
			w.current = w.LastGood
			w.reverting = true
			_, rerr := w.runChain(w.LastGood)
			if rerr != nil {
				rec.Outcome += "; rollback failed: " + flow.ErrorMessage(rerr)
			} else {
				rec.Outcome += "; rolled back to the last-known-good manifest"
			}
			rec.Rollback = w.endTree(rerr)
			w.reverting = false
		case !res.changed:
			// Nothing of the workload changed: give back the hostnames and
			// IPs this deploy took that the running version does not hold.
			if released := w.releaseOnEarlyFailure(); len(released) > 0 {
				rec.Outcome += "; released " + strings.Join(released, ", ")
			}
		}
	}
	rec.Finished = workflow.Now(w.ctx)
	w.tree = nil
	w.record(rec)
	w.publish()
	if !w.Batches() || err != nil {
		w.reportDeploy(rec, err) // a successful chain reported it as it finished
	}
	if errors.Is(err, errTeardown) {
		return err
	}
	return nil
}

// keepRestarts carries restart annotations of the running services into a
// new manifest that does not set them, as a Deployment keeps
// kubectl.kubernetes.io/restartedAt across applies: a new manifest is not a
// reason to restart again, nor to drop a restart.
func (w *deployRun) keepRestarts(m *manifest.Manifest) *manifest.Manifest {
	if w.current == nil {
		return m
	}
	// The manifest as queued, its defaults filled where it entered (lease/intake.go).
	out := *m
	out.Services = slices.Clone(m.Services)
	for i, s := range out.Services {
		old, ok := w.current.Lookup(s.Name)
		at := old.PodAnnotations[api.RestartedAtAnnotation]
		if !ok || at == "" || s.PodAnnotations[api.RestartedAtAnnotation] != "" {
			continue
		}
		ann := map[string]string{api.RestartedAtAnnotation: at}
		for k, v := range s.PodAnnotations {
			ann[k] = v
		}
		out.Services[i].PodAnnotations = ann
	}
	return &out
}

// end closes the workflow of a lease that is unknown or closed and has
// nothing deployed: failed with LeaseNotActive, after releasing anything
// it still holds.
func (w *deployRun) end() (*api.DeployStatus, error) {
	if len(w.releaseUnheld()) > 0 {
		w.publish()
	}
	w.settle()
	msg := fmt.Sprintf("lease %s is unknown or closed and nothing of it is deployed", w.lease)
	if w.lastFailure != nil {
		msg = flow.ErrorMessage(w.lastFailure)
	}
	return nil, temporal.NewNonRetryableApplicationError(msg, api.ErrLeaseNotActive, nil)
}

// continueAsNew hands the lease's state to a new run. Signals that arrived
// in this very workflow task (a teardown or redeploy racing the end of a
// deploy) are taken first and carried over, not dropped with the run: the
// ones handed to a receiver already (flow.LetReceiversRun), then the ones
// still in their channels.
func (w *deployRun) continueAsNew() (*api.DeployStatus, error) {
	w.settle()
	flow.LetReceiversRun(w.ctx)
	w.drainSignals()
	return nil, workflow.NewContinueAsNewError(w.ctx, DeployWorkflow, w.carryOver())
}

// tearDown cancels any rollout, deletes the lease's namespace (and with it
// every workload object) and releases its IPs and hostnames, last.
func (w *deployRun) tearDown() (*api.DeployStatus, error) {
	w.setPhase(api.PhaseTearingDown)
	if err := w.deleteWorkloads(); err != nil {
		return nil, err
	}
	if err := w.releaseAll(); err != nil {
		return nil, err
	}
	w.setPhase(api.PhaseTornDown)
	w.settle()
	st := w.status()
	return &st, nil
}
