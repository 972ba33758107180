package lease

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// The lease's controls: the updates, signals and queries an operator (the
// CLI, the UI, a schedule) sends a lease's workflow, their validators, and
// what each does to the run's state.

// redeploy queues the lease's last-known-good manifest again, restarted if
// asked. A lease with nothing deployed yet has nothing to redeploy.
func (w *deployRun) redeploy(req api.RedeployRequest) {
	if req.Action != api.RedeployRestart && req.Action != api.RedeployReapply {
		// A signal has no answer: what is wrong goes to the worker's log.
		workflow.GetLogger(w.ctx).Warn(fmt.Sprintf("redeploy signal ignored: action %q: want %s or %s", req.Action, api.RedeployRestart, api.RedeployReapply), "lease", w.lease)
		return
	}
	base := w.base()
	if base == nil || w.Teardown {
		workflow.GetLogger(w.ctx).Warn("redeploy ignored: nothing deployed", "lease", w.lease, "action", req.Action)
		return
	}
	if base == w.LastGood && w.rejected(w.LastGoodRevision) {
		// A signal has no answer: the refusal is recorded in the lease's
		// history, where its owner looks.
		w.refuse(req.Trigger, w.errRejected(w.LastGoodRevision, "a "+req.Action+" ("+req.Trigger+")"))
		return
	}
	m := *base
	if req.Action == api.RedeployRestart {
		at := workflow.Now(w.ctx).UTC().Format(time.RFC3339)
		m.Services = slices.Clone(m.Services) // the base is the lease's: not changed
		for i := range m.Services {
			ann := maps.Clone(m.Services[i].PodAnnotations)
			if ann == nil {
				ann = map[string]string{}
			}
			ann[api.RestartedAtAnnotation] = at
			m.Services[i].PodAnnotations = ann
		}
	}
	if w.Pending == nil {
		w.Pending = &m
		w.PendingKey, w.PendingRollbackTo = "", 0
		w.PendingTrigger = req.Trigger
		if api.CheckTrigger("trigger", req.Trigger) != nil {
			// A signal has no answer: a trigger that is not a short
			// printable word never reaches the search attributes.
			workflow.GetLogger(w.ctx).Warn("redeploy signal's trigger dropped", "lease", w.lease, "error", api.CheckTrigger("trigger", req.Trigger))
			w.PendingTrigger = ""
		}
		if w.PendingTrigger == "" {
			w.PendingTrigger = "api"
		}
	}
}

// lastIs reports whether the lease's deploy in progress, else the pending
// one, else its last recorded one, has key.
func (w *deployRun) lastIs(key string) bool {
	switch {
	case w.Pending != nil:
		return w.PendingKey == key
	case w.requested != nil:
		return w.key == key
	case len(w.History) > 0:
		return w.History[len(w.History)-1].Key == key
	}
	return false
}

func (w *deployRun) notLast(req api.DeployRequest) error {
	if req.IfLast == "" || w.lastIs(req.IfLast) {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"ifLast: lease %s's last deploy is not %s: it was deployed again since; nothing changed", w.lease, req.IfLast), api.ErrNotLastDeploy, nil)
}

func triggerOf(r api.DeployRequest) string {
	if r.Trigger == "" {
		return "api"
	}
	return r.Trigger
}

func (w *deployRun) registerControls() error {
	if err := workflow.SetQueryHandlerWithOptions(w.ctx, api.QueryStatus, func() (api.DeployStatus, error) {
		return w.status(), nil
	}, workflow.QueryHandlerOptions{Description: "The lease's phase, deploys, reservations and change classes"}); err != nil {
		return err
	}
	type control struct {
		name, description  string
		handler, validator any
	}
	controls := []control{
		{api.UpdateDeploy, `Deploy a manifest to this lease (supersedes a deploy in progress). Argument: {"manifest": {...}, "trigger": "ui"}`,
			func(_ workflow.Context, req api.DeployRequest) (api.DeployStatus, error) {
				if err := w.notLast(req); err != nil {
					return w.status(), err // another request landed first, in this task
				}
				if w.repeats(req) {
					return w.status(), nil // the same request again: its deploy runs, waits or ran
				}
				if w.joins(req) {
					st := w.status()
					st.Revision-- // the deploy in progress is the caller's: it waits for the one after the last before it
					return st, nil
				}
				w.Pending = w.taken(&req.Manifest, req.IfLast != "") // the newest manifest wins; older pending ones are dropped
				w.PendingTrigger = triggerOf(req)
				w.PendingKey = req.Key
				w.PendingPlan = req.PlanFingerprint
				w.PendingRollbackTo = 0
				w.unsettle()
				return w.status(), nil
			},
			func(_ workflow.Context, req api.DeployRequest) error {
				if err := req.Invalid(); err != nil && !(req.PassesTheRulesOfItsDay() && w.returnsToLastGood(req)) {
					return err
				}
				if err := api.CheckTrigger("trigger", req.Trigger); err != nil {
					return err
				}
				if err := api.CheckKey("key", req.Key); err != nil {
					return err
				}
				if err := api.CheckKey("ifLast", req.IfLast); err != nil {
					return err
				}
				if err := api.CheckPlanFingerprint("planFingerprint", req.PlanFingerprint); err != nil {
					return err
				}
				if err := w.notLast(req); err != nil {
					return err
				}
				if req.Manifest.Placement != nil {
					return errors.New("manifest.placement: a lease's workflow deploys to one cluster; a manifest with a placement deploys through 'deployflow deploy', which starts the lease's placement workflow")
				}
				if req.Manifest.Lease != w.lease {
					return errors.New("manifest.lease: the manifest is for lease " + req.Manifest.Lease + ", this workflow deploys lease " + w.lease)
				}
				if err := w.notTornDown(); err != nil {
					return err
				}
				if w.returnsToLastGood(req) {
					if w.rejected(w.LastGoodRevision) {
						return w.errRejected(w.LastGoodRevision, "a placement's return to the last-known-good deploy")
					}
					return req.Manifest.ValidateLenient() // held to the rules of its day
				}
				if err := req.Manifest.Validate(); err != nil {
					return err
				}
				// A running StatefulSet cannot follow every change of its
				// storage (issue 39): refused before it is accepted.
				return w.storageFollows(req)
			}},
		{api.UpdateTeardown, "Tear the lease's workload down and release its hostnames and IPs",
			func(workflow.Context) (api.DeployStatus, error) {
				w.Teardown = true
				w.unsettle()
				return w.status(), nil
			}, nil},
		{api.UpdateRetry, "Deploy the manifest of the last deploy again, if it failed (an aborted canary, a failed analysis)",
			func(workflow.Context) (api.DeployStatus, error) {
				if w.LastFailed == nil { // a deploy ended between the validator and here
					return w.status(), errors.New("the last deploy of lease " + w.lease + " did not fail: there is nothing to retry")
				}
				m := *w.LastFailed
				w.Pending, w.PendingTrigger, w.PendingPlan, w.PendingKey = &m, "retry", "", ""
				w.PendingRollbackTo = 0
				w.unsettle()
				return w.status(), nil
			},
			func(workflow.Context) error {
				switch {
				case w.notTornDown() != nil:
					return w.notTornDown()
				case w.LastFailed == nil:
					return errors.New("the last deploy of lease " + w.lease + " did not fail: there is nothing to retry")
				case w.rejected(w.LastFailedRevision):
					return w.errRejected(w.LastFailedRevision, "a retry")
				case w.Pending != nil || w.Phase == api.PhaseDeploying || w.Phase == api.PhaseAwaitingApproval:
					return errors.New("a deploy of lease " + w.lease + " is in progress or waiting: retry once it has ended")
				}
				return nil
			}},
		{api.UpdateScale, `Scale one service of the lease (a scale-only deploy). Argument: {"service": "web", "replicas": 6}`,
			func(_ workflow.Context, req api.ScaleServiceRequest) (api.DeployStatus, error) {
				m := *w.base()
				m.Services = slices.Clone(m.Services) // the base is the lease's: not changed
				for i := range m.Services {
					if m.Services[i].Name == req.Service {
						r := req.Replicas
						m.Services[i].Replicas = &r
					}
				}
				w.Pending, w.PendingTrigger, w.PendingKey = &m, "cli", ""
				w.PendingRollbackTo = 0
				w.unsettle()
				return w.status(), nil
			},
			func(_ workflow.Context, req api.ScaleServiceRequest) error {
				if req.Invalid() != nil {
					return req.Invalid()
				}
				if w.base() == nil {
					return errors.New("nothing is deployed to lease " + w.lease + " yet")
				}
				if _, ok := w.base().Lookup(req.Service); !ok {
					return fmt.Errorf("service %q: the lease runs %v", req.Service, w.base().ServiceNames())
				}
				if req.Replicas < 0 || req.Replicas > manifest.MaxReplicas {
					return fmt.Errorf("replicas: %d is out of range: use 0 to %d", req.Replicas, manifest.MaxReplicas)
				}
				if s, _ := w.base().Lookup(req.Service); s.Rollout != nil && s.Rollout.BlueGreen != nil {
					if n := s.Rollout.BlueGreen.PreviewReplicaCount; n != nil && req.Replicas < *n {
						return fmt.Errorf("replicas: %d is below service %s's blueGreen.previewReplicaCount (%d): scale to %d or more, or deploy a manifest with a smaller previewReplicaCount", req.Replicas, req.Service, *n, *n)
					}
				}
				// The operator's bound, as the last plan read it: refused
				// here rather than accepted and then refused by the plan.
				if w.Plan != nil {
					if most := maxReplicasOf(w.Plan.MaxReplicas, w.base(), req.Service); most != 0 && req.Replicas > max(most, 0) {
						return fmt.Errorf("replicas: %d: this provider allows service %s at most %d (the operator's --max-replicas for the lease, %d, less its other services' replicas)",
							req.Replicas, req.Service, max(most, 0), w.Plan.MaxReplicas)
					}
				}
				return nil
			}},
		{api.UpdateRestart, "Restart every pod of the lease on a new revision of the same manifest",
			func(workflow.Context) (api.DeployStatus, error) {
				w.redeploy(api.RedeployRequest{Action: api.RedeployRestart, Trigger: "cli"})
				w.unsettle()
				return w.status(), nil
			},
			func(workflow.Context) error {
				if w.base() == nil {
					return errors.New("nothing is deployed to lease " + w.lease + " yet")
				}
				if w.base() == w.LastGood && w.rejected(w.LastGoodRevision) {
					return w.errRejected(w.LastGoodRevision, "a restart")
				}
				return nil
			}},
	}
	for _, c := range controls {
		if err := workflow.SetUpdateHandlerWithOptions(w.ctx, c.name, c.handler, workflow.UpdateHandlerOptions{
			Validator: c.validator, Description: c.description,
		}); err != nil {
			return err
		}
	}
	// The observer's updates (lease/observe.go) and the plan's approval
	// (lease/approval.go).
	if err := w.registerObserve(); err != nil {
		return err
	}
	if err := w.registerApproval(); err != nil {
		return err
	}
	if err := w.registerRollback(); err != nil {
		return err
	}
	// Signals: a teardown, a redeploy (restart or reapply).
	w.teardowns = workflow.GetSignalChannel(w.ctx, api.SignalTeardown)
	workflow.Go(w.ctx, func(ctx workflow.Context) {
		for {
			w.teardowns.Receive(ctx, nil)
			w.Teardown = true
		}
	})
	w.redeploys = workflow.GetSignalChannel(w.ctx, api.SignalRedeploy)
	workflow.Go(w.ctx, func(ctx workflow.Context) {
		for {
			var req api.RedeployRequest
			w.redeploys.Receive(ctx, &req)
			w.redeploy(req)
		}
	})
	return nil
}

// notTornDown refuses a deploy or retry of a lease being torn down.
func (w *deployRun) notTornDown() error {
	if w.Teardown || w.Phase == api.PhaseTearingDown || w.Phase == api.PhaseTornDown {
		return errors.New("the lease is being torn down; start a new deploy once it is gone")
	}
	return nil
}

// drainSignals handles the signals delivered but not yet received.
func (w *deployRun) drainSignals() {
	for w.teardowns.ReceiveAsync(nil) {
		w.Teardown = true
	}
	for {
		var req api.RedeployRequest
		if !w.redeploys.ReceiveAsync(&req) {
			return
		}
		w.redeploy(req)
	}
}

// repeats reports whether req carries the key of the deploy in progress,
// pending or recorded: the same request again (a placement's retry, or its
// Update-with-Start whose start already carried the key).
func (w *deployRun) repeats(req api.DeployRequest) bool {
	if req.Key == "" {
		return false
	}
	if (w.requested != nil && w.key == req.Key) || (w.Pending != nil && w.PendingKey == req.Key) {
		return true
	}
	for _, r := range w.History {
		if r.Key == req.Key {
			return true
		}
	}
	return false
}

// joins reports whether a deploy request is for the deploy in progress: the
// same manifest, nothing pending, no plan or approval involved (a deploy
// bound to an approved plan may yet abort, and one awaiting approval may
// time out: a request joining either would be lost). It then joins that
// deploy rather than superseding it, which would cancel its rollouts and
// roll the same manifest out again. A start with an update (the CLI's
// update-with-start) hands the workflow the manifest twice, as its input and
// as the update; when the update comes in a later workflow task than the
// start (a loaded worker, a restart) the deploy of the input has begun.
func (w *deployRun) joins(req api.DeployRequest) bool {
	return req.Key == "" && w.Phase == api.PhaseDeploying && !w.reverting && w.Pending == nil && w.requested != nil &&
		req.PlanFingerprint == "" && w.approvedPlan == "" && !req.Manifest.RequireApproval &&
		sameManifest(w.requested, w.taken(&req.Manifest, req.IfLast != ""))
}

// sameManifest compares two manifests the lease holds: both have their
// defaults, filled where they entered (lease/intake.go).
func sameManifest(a, b *manifest.Manifest) bool {
	return reflect.DeepEqual(a, b)
}
