package lease

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Approval of a plan: with requireApproval in the manifest, a deploy stops
// after computing its plan, shows it in the status query, and waits for the
// "approve" update. Nothing has been written by then.
const (
	defaultApprovalTimeout = time.Hour
	errApprovalTimeoutText = "not approved in time"
	errStalePlanText       = "the cluster changed since the plan was approved"
	// recordBoundary is the timer that ends a workflow task, so that what
	// it read is in the history before the next one writes.
	recordBoundary = time.Millisecond
)

var (
	errApprovalTimeout = errors.New(errApprovalTimeoutText)
	errStaleApproval   = errors.New(errStalePlanText)
)

// awaitApproval waits for the plan's approval. A timeout aborts the deploy
// with nothing changed; so does a newer manifest or a teardown. Once
// approved, the plan is computed again: if the cluster changed since, the
// approved plan is stale and the deploy is refused.
func (w *deployRun) awaitApproval(m *manifest.Manifest, plan *activities.DeployPlan) error {
	previous := w.Phase
	w.approved = false
	w.setPhase(api.PhaseAwaitingApproval)
	timeout := inputSeconds(w.in.ApprovalTimeoutSeconds)
	if timeout <= 0 {
		timeout = defaultApprovalTimeout
	}
	ok, err := workflow.AwaitWithTimeout(w.ctx, timeout, func() bool {
		return w.approved || w.Teardown || w.Pending != nil
	})
	if err != nil {
		return err
	}
	restore := func() {
		if previous == "" || previous == api.PhaseDeploying {
			previous = api.PhaseAborted
		}
		w.setPhase(previous)
	}
	switch {
	case !ok:
		restore()
		return fmt.Errorf("%w (%s): the deploy was aborted and nothing was changed", errApprovalTimeout, timeout)
	case w.Teardown:
		return errTeardown
	case !w.approved:
		restore()
		return errSuperseded
	}
	again, err := w.planDeploy(m)
	if err != nil {
		return err
	}
	if again.Fingerprint != plan.Fingerprint {
		restore()
		return fmt.Errorf("%w (plan %s, now %s): nothing was changed; plan again and approve the new plan", errStaleApproval, plan.Fingerprint, again.Fingerprint)
	}
	// The second reading is recorded before anything is written: were the
	// task that read it to fail after a write, its retry would read the
	// cluster again, with that write in it, and find the plan stale
	// (CI run 43: aborted, "nothing was changed", objects written).
	if w.recordsApprovedPlan() {
		if err := workflow.Sleep(w.ctx, recordBoundary); err != nil {
			return err
		}
	}
	w.setPhase(api.PhaseDeploying)
	return nil
}

func (w *deployRun) registerApproval() error {
	return workflow.SetUpdateHandlerWithOptions(w.ctx, api.UpdateApprove,
		func(_ workflow.Context, _ api.ApproveRequest) (api.DeployStatus, error) {
			w.approved = true
			w.unsettle()
			return w.status(), nil
		},
		workflow.UpdateHandlerOptions{
			Description: `Approve the plan awaiting approval (status query: plan). Argument: {"fingerprint": "<plan fingerprint>"} or {}`,
			Validator: func(_ workflow.Context, req api.ApproveRequest) error {
				if req.Invalid() != nil {
					return req.Invalid()
				}
				if w.Phase != api.PhaseAwaitingApproval || w.Plan == nil {
					return errors.New("no plan is awaiting approval for lease " + w.lease)
				}
				if req.Fingerprint != "" && req.Fingerprint != w.Plan.Fingerprint {
					return fmt.Errorf("fingerprint %s is not the plan awaiting approval (%s): look at the plan again", req.Fingerprint, w.Plan.Fingerprint)
				}
				return nil
			},
		})
}
