package lease

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Where a lease goes back (issue 37.4): `deployflow rollback` deploys a
// recorded successful deploy's manifest again, as `kubectl rollout undo`
// does: the manifest gives each service the pod template of that deploy,
// and the rollout engine finds the ReplicaSet that still has it
// (FindNewReplicaSet) and scales it back up through the service's
// strategy, making none. `deployflow reject` marks a deploy that no retry,
// schedule, placement return or rollback deploys again. The lease keeps
// the manifests of its last maxRollbackTargets successful deploys
// (Deployed) and the deploys rejected (Rejected), both carried.

// maxRollbackTargets is how many successful deploys' manifests a lease
// keeps to return to; fitCarry drops the oldest first when the carry
// nears Temporal's payload limit.
const maxRollbackTargets = 10

// maxRejected is how many rejected deploys a lease remembers.
const maxRejected = 100

// deployedManifest is a successful deploy's manifest, with its defaults.
type deployedManifest struct {
	Revision int64             `json:"revision"`
	Manifest manifest.Manifest `json:"manifest"`
}

// remember records m as the manifest of successful deploy revision.
func (w *deployRun) remember(revision int64, m *manifest.Manifest) {
	w.LastGoodRevision = revision
	w.Deployed = append(w.Deployed, deployedManifest{Revision: revision, Manifest: *m})
	if len(w.Deployed) > maxRollbackTargets {
		w.Deployed = w.Deployed[len(w.Deployed)-maxRollbackTargets:]
	}
}

// rejected reports whether the owner rejected deploy revision.
func (w *deployRun) rejected(revision int64) bool {
	return revision != 0 && slices.Contains(w.Rejected, revision)
}

// errRejected is the refusal of a path that would deploy rejected deploy
// revision again.
func (w *deployRun) errRejected(revision int64, what string) error {
	return fmt.Errorf("deploy #%d of lease %s was rejected (deployflow reject): %s does not deploy it again; deploy a new manifest instead", revision, w.lease, what)
}

// rollbackTargets are the deploys a rollback may return to, oldest first:
// the kept ones, but the one running and the rejected ones.
func (w *deployRun) rollbackTargets() []int64 {
	var out []int64
	for _, d := range w.Deployed {
		if d.Revision != w.LastGoodRevision && !w.rejected(d.Revision) {
			out = append(out, d.Revision)
		}
	}
	return out
}

// rollbackTarget is the kept deploy a rollback to `to` returns to (0: the
// newest before the one running, not rejected), or why there is none.
func (w *deployRun) rollbackTarget(to int64) (*deployedManifest, error) {
	if to < 0 {
		return nil, fmt.Errorf("to: %d: give a deploy's revision (deployflow history)", to)
	}
	if to == 0 {
		for i := len(w.Deployed) - 1; i >= 0; i-- {
			d := &w.Deployed[i]
			if d.Revision < w.LastGoodRevision && !w.rejected(d.Revision) {
				return d, nil
			}
		}
		return nil, fmt.Errorf("lease %s has no earlier successful deploy to return to (kept: %s)", w.lease, revisions(w.rollbackTargets()))
	}
	if w.rejected(to) {
		return nil, w.errRejected(to, "a rollback")
	}
	if to == w.LastGoodRevision && w.Phase == api.PhaseActive {
		return nil, fmt.Errorf("deploy #%d is what lease %s runs: there is nothing to return to", to, w.lease)
	}
	for i := range w.Deployed {
		if w.Deployed[i].Revision == to {
			return &w.Deployed[i], nil
		}
	}
	return nil, fmt.Errorf("to: deploy #%d is not one lease %s can return to: a rollback returns to one of its last %d successful deploys (kept: %s)",
		to, w.lease, maxRollbackTargets, revisions(w.rollbackTargets()))
}

func revisions(rs []int64) string {
	if len(rs) == 0 {
		return "none"
	}
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprintf("#%d", r)
	}
	return strings.Join(s, ", ")
}

// registerRollback registers the rollback and reject updates.
func (w *deployRun) registerRollback() error {
	if err := workflow.SetUpdateHandlerWithOptions(w.ctx, api.UpdateRollback,
		func(_ workflow.Context, req api.RollbackRequest) (api.DeployStatus, error) {
			d, err := w.rollbackTarget(req.To)
			if err != nil { // a deploy ended between the validator and here
				return w.status(), err
			}
			m := d.Manifest
			m.Services = slices.Clone(m.Services) // the kept one is the lease's: not shared
			w.Pending, w.PendingTrigger, w.PendingPlan, w.PendingKey = &m, "rollback", "", ""
			w.PendingRollbackTo = d.Revision
			w.unsettle()
			return w.status(), nil
		},
		workflow.UpdateHandlerOptions{
			Description: `Deploy a recorded successful deploy's manifest again, each service's ReplicaSet of it scaled back up. Argument: {"to": 3} (0 or none: the one before the deploy running)`,
			Validator: func(_ workflow.Context, req api.RollbackRequest) error {
				if err := req.Invalid(); err != nil {
					return err
				}
				switch {
				case w.notTornDown() != nil:
					return w.notTornDown()
				case w.Pending != nil || w.Phase == api.PhaseDeploying || w.Phase == api.PhaseAwaitingApproval:
					return fmt.Errorf("a deploy of lease %s is in progress or waiting: roll back once it has ended (or abort it)", w.lease)
				}
				_, err := w.rollbackTarget(req.To)
				return err
			},
		}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(w.ctx, api.UpdateReject,
		func(_ workflow.Context, req api.RejectRequest) (api.DeployStatus, error) {
			if !w.rejected(req.Revision) {
				w.Rejected = append(w.Rejected, req.Revision)
				slices.Sort(w.Rejected)
				if len(w.Rejected) > maxRejected {
					w.Rejected = w.Rejected[len(w.Rejected)-maxRejected:]
				}
			}
			for i := range w.History {
				if w.History[i].Revision == req.Revision {
					w.History[i].Rejected = true
				}
			}
			w.unsettle()
			return w.status(), nil
		},
		workflow.UpdateHandlerOptions{
			Description: `Reject a deploy: no retry, schedule, placement return or rollback deploys it again. Argument: {"revision": 3}`,
			Validator: func(_ workflow.Context, req api.RejectRequest) error {
				if err := req.Invalid(); err != nil {
					return err
				}
				if w.Revision == 0 {
					return fmt.Errorf("lease %s has no deploy yet: there is nothing to reject", w.lease)
				}
				if req.Revision < 1 || req.Revision > w.Revision {
					return fmt.Errorf("revision: %d: lease %s has deploys #1 to #%d (deployflow history)", req.Revision, w.lease, w.Revision)
				}
				return nil
			},
		})
}

// maxRefusals is how many refused requests a lease remembers.
const maxRefusals = 10

// refuse records a request the lease refused that has no answer (a
// schedule's redeploy signal): in its status and history (Refusals) and
// in the worker's log.
func (w *deployRun) refuse(trigger string, err error) {
	if api.CheckTrigger("trigger", trigger) != nil || trigger == "" {
		trigger = "api"
	}
	w.Refusals = append(w.Refusals, api.Refusal{At: workflow.Now(w.ctx), Trigger: trigger, Error: err.Error()})
	if len(w.Refusals) > maxRefusals {
		w.Refusals = w.Refusals[len(w.Refusals)-maxRefusals:]
	}
	workflow.GetLogger(w.ctx).Warn("redeploy refused", "lease", w.lease, "error", err)
}
