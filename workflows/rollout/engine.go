package rollout

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/k8s/rollout"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// maxIdleWait bounds one wait for a change when no timed re-sync is due
// (nothing is progressing, or the rollout is paused). It is long so a
// waiting rollout adds no history; the watch inside heartbeats.
const maxIdleWait = 6 * time.Hour

// rolloutRun is one RolloutWorkflow run's state. Only the workflow goroutine
// and its update handlers touch it (Temporal runs them one at a time).
type rolloutRun struct {
	ctx   workflow.Context
	in    rolloutInput
	ref   activities.ServiceRef
	d     *appsv1.Deployment       // desired state, with the last sync's status
	state *activities.RolloutState // the cluster as last read
	step  rollout.Step
	msg   string

	stableRevision int64           // last-known-good revision, restored by abort/autoRollback
	outcome        string          // set once abort or autoRollback took over
	collisions     int             // hash collisions in a row
	statusSyncs    int             // syncs in a row that only changed the status
	unsettled      bool            // an operator control was handled and not yet settled
	unsettledAt    int             // the history length of the task that handled it
	flow.Behaviour                 // where this run's code differs from the current path (legacy.go)
	canary         *CanaryState    // a canary's progress through its steps (nil: not a canary)
	blueGreen      *BlueGreenState // a blue-green's progress (nil: not a blue-green)
	jobs           int             // analysis Jobs this run started (their names)
	undoneTo       int64           // the revision an operator's undo returned to, if any
	wake           workflow.CancelFunc
	// quickTask is the workflow task (by its history length) of the last
	// quick wait; observedAt is when that wait saw the change it returned
	// (zero if it saw none) (rollout/calls.go).
	quickTask  int
	observedAt time.Time
	// continueInGates: this run's waits and analysis gates end once its
	// history is long, so it continues as new (set where a canary's or a
	// blue-green's steps start).
	continueInGates bool
}

func newRolloutRun(ctx workflow.Context, in rolloutInput, d *appsv1.Deployment) *rolloutRun {
	r := &rolloutRun{ctx: ctx, in: in, d: d}
	r.ref = activities.ServiceRef{
		Namespace:   in.Namespace,
		Service:     in.Service,
		PodSelector: metav1.FormatLabelSelector(d.Spec.Selector),
		Pods:        d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType,
	}
	if in.Carry != nil {
		r.stableRevision = in.Carry.StableRevision
		r.outcome = in.Carry.Outcome
		r.undoneTo = in.Carry.UndoneTo
		r.canary = in.Carry.Canary
		r.blueGreen = in.Carry.BlueGreen
	}
	return r
}

// maxCollisions bounds hash collisions in a row: more means the new
// ReplicaSet's name is held by something that is not ours.
const maxCollisions = 5

// collided counts a hash collision and gives up after maxCollisions.
func (r *rolloutRun) collided() error {
	r.collisions++
	if r.collisions > maxCollisions {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: %d pod-template-hash collisions in a row: ReplicaSets named %s-<hash> that deployflow did not create are in the way; remove them", r.in.Service, r.collisions, r.in.Service),
			activities.ErrReplicaSetConflict, nil)
	}
	return nil
}

// sync is one run of the Deployment controller's syncDeployment, pure.
func (r *rolloutRun) sync() (rollout.Plan, error) {
	plan, status, err := rollout.Sync(r.d, r.state.ReplicaSets, r.oldPodsRunning(), r.now())
	if err != nil {
		return plan, temporal.NewNonRetryableApplicationError(err.Error(), api.ErrInvalidInput, nil)
	}
	r.d.Status = status
	r.step, r.msg = plan.Step, plan.Message
	if plan.Step != rollout.StepHashCollision {
		r.collisions = 0
	}
	if plan.Deployment != nil {
		status := r.d.Status
		r.d = plan.Deployment.DeepCopy()
		r.d.Status = status
	}
	return plan, nil
}

// maxStatusSyncs bounds status-only re-syncs in a row. Upstream's status
// write triggers one more sync, which finds the status unchanged and only
// then computes the progress-deadline requeue; two are always enough.
const maxStatusSyncs = 3

// statusChanged reports whether the last sync only changed the status and
// should be followed by another sync right away, as upstream's would.
func (r *rolloutRun) statusChanged(plan rollout.Plan) bool {
	if !plan.StatusChanged || r.statusSyncs >= maxStatusSyncs {
		r.statusSyncs = 0
		return false
	}
	r.statusSyncs++
	return true
}

// oldPodsRunning is upstream's oldPodsRunning on the state read: Recreate
// waits until no pod of an old ReplicaSet runs.
func (r *rolloutRun) oldPodsRunning() bool {
	newRS := rollout.FindNewReplicaSet(r.d, r.state.ReplicaSets)
	_, oldRSs := rollout.FindOldReplicaSets(r.d, r.state.ReplicaSets)
	podMap := map[types.UID][]*corev1.Pod{}
	for uid, n := range r.state.ActivePods {
		for i := int32(0); i < n; i++ {
			podMap[uid] = append(podMap[uid], &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}})
		}
	}
	return rollout.OldPodsRunning(newRS, oldRSs, podMap)
}

func (r *rolloutRun) timedOut() bool {
	cond := rollout.GetDeploymentCondition(r.d.Status, appsv1.DeploymentProgressing)
	return cond != nil && cond.Reason == rollout.TimedOutReason
}

func (r *rolloutRun) complete() bool {
	return !r.d.Spec.Paused && rollout.DeploymentComplete(r.d, &r.d.Status)
}

// stableRevision is the last-known-good revision at the start of a
// rollout: the newest ReplicaSet that has replicas and all of them available.
func stableRevision(rsList []*appsv1.ReplicaSet) int64 {
	var best int64
	for _, rs := range rsList {
		rev, err := rollout.Revision(rs)
		if err != nil || rs.Spec.Replicas == nil || *rs.Spec.Replicas == 0 {
			continue
		}
		if rs.Status.AvailableReplicas >= *rs.Spec.Replicas && rev > best {
			best = rev
		}
	}
	return best
}

// abortTarget is the revision an abort returns to: the stable revision
// read at the start or, where that read found none, the newest revision
// other than the one being rolled out whose replicas are all available
// now. A ReplicaSet's status can lag its pods (its controller behind, on a
// loaded machine: seen in CI), and a start that read the last-known-good
// version one pod short would otherwise leave the whole rollout without an
// abort: "could not observe" is not "nothing to go back to". A blue-green
// keeps the one it switched from.
func (r *rolloutRun) abortTarget() int64 {
	if r.stableRevision != 0 || r.blueGreen != nil {
		return r.stableRevision
	}
	newRS := rollout.FindNewReplicaSet(r.d, r.state.ReplicaSets)
	others := make([]*appsv1.ReplicaSet, 0, len(r.state.ReplicaSets))
	for _, rs := range r.state.ReplicaSets {
		if rs != newRS {
			others = append(others, rs)
		}
	}
	return stableRevision(others)
}

// canRollBack reports whether a stable revision exists that is not the one
// being rolled out.
func (r *rolloutRun) canRollBack() bool {
	if r.stableRevision == 0 {
		return false
	}
	newRS := rollout.FindNewReplicaSet(r.d, r.state.ReplicaSets)
	if newRS == nil {
		return true
	}
	rev, _ := rollout.Revision(newRS)
	return rev != r.stableRevision
}

// rollsBackAtDeadline reports whether autoRollback returns the rollout to
// its last-known-good revision at the progress deadline. Where the start
// read found none, it looks again (abortTarget), as an abort does: a
// ReplicaSet's status can lag its pods, and "read one pod short" is not
// "nothing to go back to" (CI saw a broken revision left half rolled out
// so).
func (r *rolloutRun) rollsBackAtDeadline() bool {
	if !r.in.AutoRollback || r.outcome != "" {
		return false
	}
	if r.stableRevision == 0 {
		if rev := r.abortTarget(); rev != 0 {
			r.stableRevision = rev
		}
	}
	return r.canRollBack()
}

// rollBackToStable makes the last-known-good revision the desired one again
// (kubectl rollout undo --to-revision), so the next syncs scale it back up
// and the failed one down.
func (r *rolloutRun) rollBackToStable(outcome string) {
	res := rollout.RollbackToRevision(r.d, r.state.ReplicaSets, r.stableRevision)
	status := r.d.Status
	r.d = res.Deployment
	r.d.Status = status
	r.d.Spec.Paused = false
	r.outcome = outcome
	r.msg = res.Message
	workflow.GetLogger(r.ctx).Warn("rolling back", "service", r.in.Service, "revision", r.stableRevision, "reason", outcome)
}
