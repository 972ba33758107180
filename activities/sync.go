package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deployflow/deployflow/k8s/rollout"
)

// A rollout's cluster calls as one local activity per step (issue 11.3):
// preparing a rollout, and applying one sync's decision then reading the
// cluster again, instead of one history event per read and per write.

// PrepareRolloutInput is a rollout's first step.
type PrepareRolloutInput struct {
	Namespace EnsureNamespaceInput `json:"namespace"`
	// Deployment is the desired Deployment, as the manifest renders it.
	Deployment *appsv1.Deployment `json:"deployment"`
	Ref        ServiceRef         `json:"ref"`
}

// PrepareRolloutResult is the desired Deployment as the API server defaults
// it and what runs of the service now.
type PrepareRolloutResult struct {
	Deployment *appsv1.Deployment `json:"deployment"`
	State      RolloutState       `json:"state"`
}

// PrepareRollout ensures the namespace (EnsureNamespace), defaults and
// validates the desired Deployment (DefaultDeployment) and reads the
// service's ReplicaSets (ReadRolloutState).
func (a *Activities) PrepareRollout(ctx context.Context, in PrepareRolloutInput) (*PrepareRolloutResult, error) {
	if err := a.EnsureNamespace(ctx, in.Namespace); err != nil {
		return nil, err
	}
	d, err := a.DefaultDeployment(ctx, DefaultDeploymentInput{Deployment: in.Deployment})
	if err != nil {
		return nil, err
	}
	st, err := a.ReadRolloutState(ctx, in.Ref)
	if err != nil {
		return nil, err
	}
	return &PrepareRolloutResult{Deployment: d, State: *st}, nil
}

// ApplyPlanInput is one sync's decided writes for one service, in
// upstream's order: update or create the new ReplicaSet, scale, delete old
// history.
type ApplyPlanInput struct {
	Ref     ServiceRef           `json:"ref"`
	Update  *appsv1.ReplicaSet   `json:"update,omitempty"`
	Create  *appsv1.ReplicaSet   `json:"create,omitempty"`
	Scales  []rollout.ScaleOp    `json:"scales,omitempty"`
	Deletes []string             `json:"deletes,omitempty"`
	UIDs    map[string]types.UID `json:"uids,omitempty"` // of the ReplicaSets read, by name
}

// ApplyPlan performs the writes (UpdateReplicaSet, EnsureReplicaSet,
// ScaleReplicaSet, DeleteReplicaSet) and reads the service again
// (ReadRolloutState), as upstream re-syncs on the events of its own writes.
// A StalePlan (someone else changed a ReplicaSet in between) stops the
// writes: the state read is what the next decision starts from. Each write
// is idempotent, so a retry of the whole call finds done what was done.
func (a *Activities) ApplyPlan(ctx context.Context, in ApplyPlanInput) (*ApplyPlanResult, error) {
	var out ApplyPlanResult
	if err := a.applyPlan(ctx, in, &out); err != nil {
		if !IsStalePlan(err) {
			return nil, err
		}
		out.Stale = err.Error()
	}
	st, err := a.ReadRolloutState(ctx, in.Ref)
	if err != nil {
		return nil, err
	}
	out.State = *st
	return &out, nil
}

// ApplyPlanResult is the state after a sync's writes, and the writes, as
// the history shows them.
type ApplyPlanResult struct {
	State RolloutState `json:"state"`
	// Scales are the scales performed (From == To: annotations only; Wrote
	// false: found done by a retry).
	Scales []ScaleResult `json:"scales,omitempty"`
	// Stale says why the writes stopped early, if they did.
	Stale string `json:"stale,omitempty"`
}

func (a *Activities) applyPlan(ctx context.Context, in ApplyPlanInput, out *ApplyPlanResult) error {
	uids := map[string]types.UID{}
	for name, uid := range in.UIDs {
		uids[name] = uid
	}
	if in.Update != nil {
		if _, err := a.UpdateReplicaSet(ctx, UpdateReplicaSetInput{ReplicaSet: in.Update}); err != nil {
			return err
		}
	}
	if in.Create != nil {
		rs, err := a.EnsureReplicaSet(ctx, EnsureReplicaSetInput{ReplicaSet: in.Create})
		if err != nil {
			return err
		}
		uids[rs.Name] = rs.UID
	}
	for _, op := range in.Scales {
		res, err := a.ScaleReplicaSet(ctx, ScaleInput{Namespace: in.Ref.Namespace, Op: op, UID: uids[op.ReplicaSet]})
		if err != nil {
			return err
		}
		out.Scales = append(out.Scales, *res)
	}
	for _, name := range in.Deletes {
		if err := a.DeleteReplicaSet(ctx, DeleteReplicaSetInput{Namespace: in.Ref.Namespace, Name: name, UID: uids[name]}); err != nil {
			return err
		}
	}
	return nil
}

// IsStalePlan reports whether err is a StalePlan refusal: the cluster
// changed under a decision, which is read again, not retried.
func IsStalePlan(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == ErrStalePlan
}
