package rollout

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// What a canary's and a blue-green's scaling steps share: the new version
// beside the stable one, each scaled on its own, and a wait for pods within
// the progress deadline.

// sides is what a scaling step's sync reads.
type sides struct {
	replicas, surge, unavailable int32
	newRS, stable                *appsv1.ReplicaSet
	others                       []*appsv1.ReplicaSet // old ReplicaSets other than the stable one
}

// readSides resolves the limits and finds the new and the stable
// ReplicaSets. If there is no new ReplicaSet yet, it creates one at 0
// replicas and reports created: the sync ends there.
func (r *rolloutRun) readSides() (s sides, created bool, err error) {
	s.replicas = *r.d.Spec.Replicas
	s.surge, s.unavailable, err = rollout.ResolveFenceposts(r.d.Spec.Strategy.RollingUpdate.MaxSurge, r.d.Spec.Strategy.RollingUpdate.MaxUnavailable, s.replicas)
	if err != nil {
		return s, false, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidInput, nil)
	}
	s.newRS = rollout.FindNewReplicaSet(r.d, r.state.ReplicaSets)
	_, olds := rollout.FindOldReplicaSets(r.d, r.state.ReplicaSets)
	if s.newRS == nil {
		rs, err := rollout.NewReplicaSetFor(r.d, olds)
		if err != nil {
			return s, false, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidInput, nil)
		}
		zero := int32(0)
		rs.Spec.Replicas = &zero
		rollout.SetReplicasAnnotations(rs, s.replicas, s.replicas+s.surge)
		return s, true, r.apply(rollout.Plan{Create: rs})
	}
	for _, rs := range olds {
		if rev, _ := rollout.Revision(rs); rev == r.stableRevision {
			s.stable = rs
		} else {
			s.others = append(s.others, rs)
		}
	}
	if s.stable == nil {
		return s, false, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: the stable revision %d has no ReplicaSet any more", r.in.Service, r.stableRevision), api.ErrInvalidInput, nil)
	}
	return s, false, nil
}

// scaleOthersDown are the scales of old ReplicaSets, other than the stable
// one, that an interrupted rollout left with pods.
func (r *rolloutRun) scaleOthersDown(s sides) []rollout.ScaleOp {
	var out []rollout.ScaleOp
	for _, rs := range s.others {
		if *rs.Spec.Replicas > 0 {
			out = append(out, r.sideScale(rs, 0, s, "old"))
		}
	}
	return out
}

// sideScale scales one side to to, recording the desired and maximum
// replicas as the Deployment controller does.
func (r *rolloutRun) sideScale(rs *appsv1.ReplicaSet, to int32, s sides, side string) rollout.ScaleOp {
	verb := "up"
	if to < *rs.Spec.Replicas {
		verb = "down"
	}
	return rollout.ScaleOp{ReplicaSet: rs.Name, From: *rs.Spec.Replicas, To: to, DesiredReplicas: s.replicas, MaxReplicas: s.replicas + s.surge,
		Reason: fmt.Sprintf("Scaled %s %s replica set %s from %d to %d", verb, side, rs.Name, *rs.Spec.Replicas, to)}
}

// waitForPods waits for the next change of the ReplicaSets within the
// progress deadline counted from *started; a change restarts it (progress,
// as upstream counts it). It reports false, without waiting, once the
// deadline has passed.
func (r *rolloutRun) waitForPods(started *time.Time) (bool, error) {
	deadline := time.Duration(*r.d.Spec.ProgressDeadlineSeconds) * time.Second
	left := started.Add(deadline).Sub(workflow.Now(r.ctx))
	if left <= 0 {
		return false, nil
	}
	before := r.state.Digest
	if err := r.waitForChange(left); err != nil {
		return false, err
	}
	if r.state.Digest != before {
		*started = workflow.Now(r.ctx)
	}
	return true, nil
}
