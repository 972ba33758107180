package stateful

import (
	"errors"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
)

// registerControls installs the status query and the operator updates
// (pause, resume, promote, abort), under the names a Deployment's rollout
// answers to, so `deployflow pause|resume|promote|abort <lease> <service>`
// steer either kind. Validators refuse a request before it is written to
// history.
func (r *run) registerControls() error {
	if err := workflow.SetQueryHandlerWithOptions(r.ctx, api.QueryStatus, func() (api.RolloutStatus, error) {
		return r.status(), nil
	}, workflow.QueryHandlerOptions{Description: "The StatefulSet's partition, revisions and the step waited for"}); err != nil {
		return err
	}
	type control struct {
		name, description  string
		handler, validator any
	}
	controls := []control{
		{api.UpdatePause, "Hold the partition where it is until resume",
			func(workflow.Context) (api.RolloutStatus, error) {
				r.Paused = true
				return r.changed("paused")
			},
			func(workflow.Context) error { return r.notReturning() }},
		{api.UpdateResume, "Let a paused rollout lower the partition again",
			func(workflow.Context) (api.RolloutStatus, error) {
				r.Paused = false
				return r.changed("resumed")
			},
			func(workflow.Context) error {
				if !r.Paused {
					return errors.New("the rollout is not paused")
				}
				return nil
			}},
		{api.UpdatePromote, "End the canary's pause or analysis step now",
			func(workflow.Context, api.PromoteRequest) (api.RolloutStatus, error) {
				r.promote = true
				return r.changed("promoted")
			},
			func(_ workflow.Context, req api.PromoteRequest) error {
				if req.Invalid() != nil {
					return req.Invalid()
				}
				if req.Full {
					return errors.New("full: a stateful rollout takes its steps one at a time; promote ends the pause step waited on")
				}
				if r.gate == "" {
					return errors.New("the rollout waits in no pause or analysis step: nothing to promote")
				}
				return nil
			}},
		{api.UpdateAbort, "Return every released ordinal to the previous revision, keeping each pod's claims",
			func(workflow.Context) (api.RolloutStatus, error) {
				r.abort = true
				return r.changed("aborted")
			},
			func(workflow.Context) error { return r.notReturning() }},
	}
	for _, c := range controls {
		if err := workflow.SetUpdateHandlerWithOptions(r.ctx, c.name, c.handler,
			workflow.UpdateHandlerOptions{Validator: c.validator, Description: c.description}); err != nil {
			return err
		}
	}
	return nil
}

// changed records an operator's control and wakes the step's wait.
func (r *run) changed(msg string) (api.RolloutStatus, error) {
	r.msg, r.unsettled = msg, true
	workflow.GetLogger(r.ctx).Info("stateful rollout control", "service", r.in.Service, "change", msg)
	if r.wake != nil {
		r.wake()
	}
	return r.status(), nil
}

// notReturning refuses controls once a return to the previous revision
// has taken over.
func (r *run) notReturning() error {
	if r.Outcome != "" || r.Reverting {
		return errors.New("the rollout is already returning to the previous revision")
	}
	return nil
}
