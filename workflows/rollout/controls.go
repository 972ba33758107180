package rollout

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// registerControls installs the status query and the operator updates. Each
// update changes the desired state only; the loop's next sync turns that into
// scaling, exactly like an edit of a Deployment object would. Validators
// reject a request before it is written to history.
func (r *rolloutRun) registerControls() error {
	if err := workflow.SetQueryHandlerWithOptions(r.ctx, api.QueryStatus, func() (api.RolloutStatus, error) {
		return r.status(), nil
	}, workflow.QueryHandlerOptions{Description: "ReplicaSets, conditions and the current step of this rollout"}); err != nil {
		return err
	}
	type control struct {
		name, description  string
		handler, validator any
	}
	controls := []control{
		{api.UpdatePause, "Hold all scaling until resume (kubectl rollout pause)",
			func(workflow.Context) (api.RolloutStatus, error) {
				r.d.Spec.Paused = true
				return r.changed("paused")
			},
			func(workflow.Context) error { return r.notFinishing() }},
		{api.UpdateResume, "Continue a paused rollout (kubectl rollout resume)",
			func(workflow.Context) (api.RolloutStatus, error) {
				r.d.Spec.Paused = false
				return r.changed("resumed")
			},
			func(workflow.Context) error {
				if !r.d.Spec.Paused {
					return errors.New("the rollout is not paused")
				}
				return nil
			}},
		{api.UpdateScale, `Change the desired replicas; ReplicaSets are resized proportionally (kubectl scale). Argument: {"replicas": N}`,
			func(_ workflow.Context, req api.ScaleRequest) (api.RolloutStatus, error) {
				r.d.Spec.Replicas = &req.Replicas
				return r.changed(fmt.Sprintf("scaled to %d", req.Replicas))
			},
			func(_ workflow.Context, req api.ScaleRequest) error {
				if req.Invalid() != nil {
					return req.Invalid()
				}
				if req.Replicas < 0 || req.Replicas > manifest.MaxReplicas {
					return fmt.Errorf("replicas: %d is out of range: use 0 to %d (as a lease's scale)", req.Replicas, manifest.MaxReplicas)
				}
				if most := max(r.in.MaxReplicas, 0); r.in.MaxReplicas != 0 && req.Replicas > most {
					return fmt.Errorf("replicas: %d: this provider allows this service at most %d (the operator's --max-replicas for the lease, less its other services' replicas)", req.Replicas, most)
				}
				return nil
			}},
		{api.UpdateUndo, `Roll back to a revision, reusing its ReplicaSet (kubectl rollout undo). Argument: {"toRevision": N}, 0 for the previous one`,
			func(_ workflow.Context, req api.UndoRequest) (api.RolloutStatus, error) {
				if r.blueGreen != nil {
					req.ToRevision = r.stableRevision // still up: the switch back needs no pod
				}
				res := rollout.RollbackToRevision(r.d, r.state.ReplicaSets, req.ToRevision)
				status := r.d.Status
				r.d = res.Deployment
				r.d.Status = status
				if res.Reason == rollout.RollbackDone {
					r.undoneTo = res.Revision // the rollout no longer runs the template it was asked for
				}
				return r.changed(res.Message)
			},
			func(_ workflow.Context, req api.UndoRequest) error {
				if req.Invalid() != nil {
					return req.Invalid()
				}
				if err := r.notFinishing(); err != nil {
					return err
				}
				if req.ToRevision < 0 {
					return fmt.Errorf("toRevision: %d is negative; give a revision from the status query, or 0 for the previous one", req.ToRevision)
				}
				if err := r.blueGreenControl(api.UpdateUndo, req.ToRevision); err != nil {
					return err
				}
				if res := rollout.RollbackToRevision(r.d, r.state.ReplicaSets, req.ToRevision); res.Reason == rollout.RollbackRevisionNotFound {
					return fmt.Errorf("toRevision %d: %s; the status query lists the revisions", req.ToRevision, res.Message)
				}
				return nil
			}},
		{api.UpdateRestart, "Replace every pod with a new revision of the same template (kubectl rollout restart)",
			func(ctx workflow.Context) (api.RolloutStatus, error) {
				if r.d.Spec.Template.Annotations == nil {
					r.d.Spec.Template.Annotations = map[string]string{}
				}
				at := workflow.Now(ctx).UTC().Format(time.RFC3339)
				// The time is recorded before the template it stamps is
				// written: a task that failed after writing, taken again
				// at a later second, would stamp another time and roll a
				// second revision (CI run 45).
				if r.recordsRestartTime(ctx) {
					if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
						return r.status(), err
					}
				}
				r.d.Spec.Template.Annotations[api.RestartedAtAnnotation] = at
				return r.changed("restarted")
			},
			func(workflow.Context) error {
				if err := r.notFinishing(); err != nil {
					return err
				}
				return r.blueGreenControl(api.UpdateRestart, 0)
			}},
		{api.UpdatePromote, `Canary: end the step in progress (a pause, an analysis) and go on; {"full": true} skips every remaining step`,
			func(_ workflow.Context, req api.PromoteRequest) (api.RolloutStatus, error) {
				if b := r.blueGreen; b != nil {
					b.promote = true
					return r.changed("promoted: switching the active Service to the new version")
				}
				if req.Full {
					r.canary.Promoted = true
					return r.changed("promoted: skipping the remaining steps")
				}
				r.canary.promote = true
				return r.changed(fmt.Sprintf("promoted past step %d/%d (%s)", r.canary.Step+1, len(r.in.Steps), r.in.Steps[r.canary.Step]))
			},
			func(_ workflow.Context, req api.PromoteRequest) error {
				if req.Invalid() != nil {
					return req.Invalid()
				}
				if err := r.notFinishing(); err != nil {
					return err
				}
				if r.blueGreen != nil {
					return r.blueGreenControl(api.UpdatePromote, 0)
				}
				if r.canary == nil || r.canary.Promoted || r.canary.Step >= len(r.in.Steps) {
					return errors.New("there is no canary step to promote: this rollout is not a canary, or its steps are done")
				}
				return nil
			}},
		{api.UpdateAbort, "Stop this rollout and return to the last-known-good revision",
			func(ctx workflow.Context) (api.RolloutStatus, error) {
				// Only where the start read none: an abort refused
				// before, so no history holds this path (no gate).
				r.stableRevision = r.abortTarget()
				r.rollBackToStable(api.OutcomeAborted)
				if r.canary != nil && r.canary.Reason == "" {
					r.canary.Reason = "by an operator"
					r.canary.abortedByOperator = true
				}
				if r.blueGreen != nil && r.blueGreen.Reason == "" {
					r.blueGreen.Reason = "by an operator"
				}
				// Through a Gateway, every request is on the stable
				// version when the abort is answered: a worker killed
				// right after it leaves none on the canary.
				if err := r.trafficOnAbort(ctx); err != nil {
					return r.status(), err
				}
				return r.changed(fmt.Sprintf("aborted: rolling back to revision %d", r.stableRevision))
			},
			func(workflow.Context) error {
				if err := r.notFinishing(); err != nil {
					return err
				}
				if r.abortTarget() == 0 || r.stableRevision != 0 && !r.canRollBack() {
					return errors.New("there is no other fully available revision to go back to; use undo or scale instead")
				}
				return r.blueGreenControl(api.UpdateAbort, 0)
			}},
	}
	for _, c := range controls {
		if err := workflow.SetUpdateHandlerWithOptions(r.ctx, c.name, c.handler, workflow.UpdateHandlerOptions{
			Validator: c.validator, Description: c.description,
		}); err != nil {
			return err
		}
	}
	return nil
}

// changed records an operator's change and wakes the loop to act on it.
func (r *rolloutRun) changed(msg string) (api.RolloutStatus, error) {
	r.msg = msg
	r.unsettled = true
	r.unsettledAt = workflow.GetInfo(r.ctx).GetCurrentHistoryLength()
	workflow.GetLogger(r.ctx).Info("rollout control", "service", r.in.Service, "change", msg)
	r.wakeUp()
	return r.status(), nil
}

// notFinishing rejects controls once abort or autoRollback has taken over.
func (r *rolloutRun) notFinishing() error {
	if r.outcome != "" {
		return fmt.Errorf("the rollout is already returning to revision %d (%s)", r.stableRevision, r.outcome)
	}
	return nil
}

// settleControls ends the current workflow task with a tiny durable timer
// if an operator control was handled in it. The server refuses to complete
// a workflow while new events (say, the interrupted wait's result) are
// arriving, and a refused task takes the updates it accepted with it: the
// operator would see "unexpected workflow task failure" for an abort that
// then never happened. Settling first records the update on its own.
func (r *rolloutRun) settleControls() {
	if r.unsettled && r.Batches() && workflow.GetInfo(r.ctx).GetCurrentHistoryLength() > r.unsettledAt {
		r.unsettled = false // handled in a task that has completed: recorded already
	}
	if r.unsettled {
		_ = workflow.Sleep(r.ctx, time.Millisecond)
		r.unsettled = false
	}
}

// wakeUp interrupts a running wait so the next sync sees a control's change.
func (r *rolloutRun) wakeUp() {
	if r.wake != nil {
		r.wake()
	}
}

// blueGreenControl says why an operator's control does not apply to this
// blue-green now, or nil. Undo and abort switch back to the stable version
// while it is still up (until the scale-down delay ends), and only to it;
// a new template comes by a new deploy, not restart; promote acts on the
// promotion and the analyses around it.
func (r *rolloutRun) blueGreenControl(control string, toRevision int64) error {
	b := r.blueGreen
	if b == nil {
		return nil
	}
	steps := r.blueGreenSteps()
	kind := ""
	if b.Step < len(steps) {
		kind = steps[b.Step].Kind
	}
	switch control {
	case api.UpdateRestart:
		return errors.New("a blue-green changes its template by a new deploy (deployflow deploy), not restart")
	case api.UpdateUndo, api.UpdateAbort:
		if kind == "" {
			return fmt.Errorf("the scale-down delay is over and revision %d is scaled down: deploy its manifest again (it runs as a new blue-green)", r.stableRevision)
		}
		if control == api.UpdateUndo && toRevision != 0 && toRevision != r.stableRevision {
			return fmt.Errorf("toRevision: a blue-green switches back to its stable version, revision %d, which is still up; leave toRevision out or give %d", r.stableRevision, r.stableRevision)
		}
	case api.UpdatePromote:
		switch kind {
		case manifest.BlueGreenPrePromotion, manifest.BlueGreenPromotion, manifest.BlueGreenPostPromo:
		case manifest.BlueGreenPreview:
			return errors.New("nothing to promote yet: the preview is coming up")
		default:
			return errors.New("this blue-green is promoted already")
		}
	}
	return nil
}
