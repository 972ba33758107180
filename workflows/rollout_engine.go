package workflows

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// maxIdleWait bounds one wait for a change when no timed re-sync is due
// (nothing is progressing, or the rollout is paused). It is long so a
// waiting rollout adds no history; the watch inside heartbeats.
const maxIdleWait = 6 * time.Hour

// continueAsNewAfter caps one run's history; the rollout then continues as
// a new run carrying its desired state and status.
const continueAsNewAfter = 4000

// rolloutRun is one RolloutWorkflow run's state. Only the workflow goroutine
// and its update handlers touch it (Temporal runs them one at a time).
type rolloutRun struct {
	ctx   workflow.Context
	in    RolloutInput
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
	fewer          bool            // this run takes versionFewerEvents
	canary         *CanaryState    // a canary's progress through its steps (nil: not a canary)
	blueGreen      *BlueGreenState // a blue-green's progress (nil: not a blue-green)
	jobs           int             // analysis Jobs this run started (their names)
	undoneTo       int64           // the revision an operator's undo returned to, if any
	wake           workflow.CancelFunc
	// continueInGates: this run's waits and analysis gates end once its
	// history is long, so it continues as new (versionContinueInGates).
	continueInGates bool
}

func newRolloutRun(ctx workflow.Context, in RolloutInput, d *appsv1.Deployment) *rolloutRun {
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

// prepare ensures the namespace (usable for pods), replaces the desired
// Deployment by the API server's defaulted version of it, so the
// pod-template-hash matches the cluster's, and reads what runs of the
// service. A continued run has done the first two.
func (r *rolloutRun) prepare() error {
	switch {
	case r.in.Carry != nil:
		return r.read()
	case r.fewer:
		var a *activities.Activities
		var res activities.PrepareRolloutResult
		if err := workflow.ExecuteLocalActivity(kubeSteps(r.ctx, "ensure namespace, default "+r.in.Service+", read"), a.PrepareRollout,
			activities.PrepareRolloutInput{Namespace: r.namespace(), Deployment: r.d, Ref: r.ref}).Get(r.ctx, &res); err != nil {
			return err
		}
		r.d, r.state = res.Deployment, &res.State
		return nil
	}
	// Legacy: one local activity per call.
	if err := r.ensureNamespace(); err != nil {
		return err
	}
	if err := r.defaultDeployment(); err != nil {
		return err
	}
	return r.read()
}

func (r *rolloutRun) namespace() activities.EnsureNamespaceInput {
	return activities.EnsureNamespaceInput{
		Name:   r.in.Namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "deployflow"},
		// Who started this rollout, as Temporal says (issue 20.5).
		Rollout: true, ParentLease: r.parentLease(),
	}
}

// parentLease is the lease whose workflow started this rollout as its
// child, "" for a standalone rollout. A continued run has it from the run
// it continues (its carry is the workflow's own: input_guard.go).
func (r *rolloutRun) parentLease() string {
	if p := workflow.GetInfo(r.ctx).ParentWorkflowExecution; p != nil {
		if lease, ok := strings.CutPrefix(p.ID, DeployWorkflowID("")); ok {
			return lease
		}
		return ""
	}
	if r.in.Carry != nil {
		return r.in.Carry.ParentLease
	}
	return ""
}

func (r *rolloutRun) ensureNamespace() error {
	var a *activities.Activities
	return workflow.ExecuteLocalActivity(r.kubeCtx("ensure namespace "+r.in.Namespace), a.EnsureNamespace, r.namespace()).Get(r.ctx, nil)
}

// defaultDeployment replaces the desired Deployment by the API server's
// defaulted version of it, so the pod-template-hash matches the cluster's.
func (r *rolloutRun) defaultDeployment() error {
	var a *activities.Activities
	var d *appsv1.Deployment
	if err := workflow.ExecuteLocalActivity(r.kubeCtx("default and validate "+r.in.Service), a.DefaultDeployment,
		activities.DefaultDeploymentInput{Deployment: r.d}).Get(r.ctx, &d); err != nil {
		return err
	}
	r.d = d
	return nil
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

// read refreshes the cluster state.
func (r *rolloutRun) read() error {
	var a *activities.Activities
	var st activities.RolloutState
	if err := workflow.ExecuteLocalActivity(r.kubeCtx("read "+r.in.Service), a.ReadRolloutState, r.ref).Get(r.ctx, &st); err != nil {
		return err
	}
	r.state = &st
	return nil
}

// sync is one run of the Deployment controller's syncDeployment, pure.
func (r *rolloutRun) sync() (rollout.Plan, error) {
	plan, status, err := rollout.Sync(r.d, r.state.ReplicaSets, r.oldPodsRunning(), workflow.Now(r.ctx))
	if err != nil {
		return plan, temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidInput, nil)
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

// apply performs a plan in upstream's order: update or create the new
// ReplicaSet, scale, delete old history. Then it reads the cluster again, as
// upstream re-syncs on the events of its own writes. A StalePlan (someone
// else changed a ReplicaSet in between) just means: read and decide again.
func (r *rolloutRun) apply(plan rollout.Plan) error {
	var a *activities.Activities
	uids := map[string]types.UID{}
	for _, rs := range r.state.ReplicaSets {
		uids[rs.Name] = rs.UID
	}
	if r.fewer {
		in := activities.ApplyPlanInput{Ref: r.ref, Update: plan.Update, Scales: plan.Scales, Deletes: plan.Deletes, UIDs: uids}
		if plan.Create != nil {
			in.Create = plan.Create.DeepCopy()
			in.Create.Labels[activities.ServiceLabel] = r.in.Service
		}
		var res activities.ApplyPlanResult
		if err := workflow.ExecuteLocalActivity(kubeSteps(r.ctx, planSummary(plan)), a.ApplyPlan, in).Get(r.ctx, &res); err != nil {
			return err
		}
		r.state = &res.State
		return nil
	}
	// Legacy: one local activity per write, then a read.
	err := func() error {
		if plan.Update != nil {
			var rs *appsv1.ReplicaSet
			summary := fmt.Sprintf("update %s (revision %s)", plan.Update.Name, plan.Update.Annotations[rollout.RevisionAnnotation])
			if err := workflow.ExecuteLocalActivity(r.kubeCtx(summary), a.UpdateReplicaSet,
				activities.UpdateReplicaSetInput{ReplicaSet: plan.Update}).Get(r.ctx, &rs); err != nil {
				return err
			}
		}
		if plan.Create != nil {
			want := plan.Create.DeepCopy()
			want.Labels[activities.ServiceLabel] = r.in.Service
			var rs *appsv1.ReplicaSet
			summary := fmt.Sprintf("create %s with %d replicas (revision %s)", want.Name, *want.Spec.Replicas, want.Annotations[rollout.RevisionAnnotation])
			if err := workflow.ExecuteLocalActivity(r.kubeCtx(summary), a.EnsureReplicaSet,
				activities.EnsureReplicaSetInput{ReplicaSet: want}).Get(r.ctx, &rs); err != nil {
				return err
			}
			uids[rs.Name] = rs.UID
		}
		for _, op := range plan.Scales {
			summary := fmt.Sprintf("scale %s %d→%d", op.ReplicaSet, op.From, op.To)
			if err := workflow.ExecuteLocalActivity(r.kubeCtx(summary), a.ScaleReplicaSet, activities.ScaleInput{
				Namespace: r.in.Namespace, Op: op, UID: uids[op.ReplicaSet],
			}).Get(r.ctx, nil); err != nil {
				return err
			}
		}
		for _, name := range plan.Deletes {
			if err := workflow.ExecuteLocalActivity(r.kubeCtx("delete old "+name), a.DeleteReplicaSet, activities.DeleteReplicaSetInput{
				Namespace: r.in.Namespace, Name: name, UID: uids[name],
			}).Get(r.ctx, nil); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil && !activities.IsStalePlan(err) {
		return err
	}
	return r.read()
}

// planSummary is what a sync writes, as the UI shows its local activity.
func planSummary(plan rollout.Plan) string {
	var ops []string
	if plan.Update != nil {
		ops = append(ops, fmt.Sprintf("update %s (revision %s)", plan.Update.Name, plan.Update.Annotations[rollout.RevisionAnnotation]))
	}
	if c := plan.Create; c != nil {
		ops = append(ops, fmt.Sprintf("create %s with %d replicas (revision %s)", c.Name, *c.Spec.Replicas, c.Annotations[rollout.RevisionAnnotation]))
	}
	for _, op := range plan.Scales {
		ops = append(ops, fmt.Sprintf("scale %s %d→%d", op.ReplicaSet, op.From, op.To))
	}
	for _, name := range plan.Deletes {
		ops = append(ops, "delete old "+name)
	}
	if len(ops) == 0 {
		return "read"
	}
	return strings.Join(ops, ", ") + "; read"
}

// waitForChange blocks until the service's ReplicaSets (or, for Recreate,
// pods) change, requeueAfter passes (the controller's progress-deadline
// re-check), or an operator control wakes it.
func (r *rolloutRun) waitForChange(requeueAfter time.Duration) error {
	timeout := requeueAfter
	if timeout <= 0 {
		timeout = maxIdleWait
	}
	waitCtx, cancel := workflow.WithCancel(r.ctx)
	r.wake = cancel
	defer func() { r.wake = nil }()

	var a *activities.Activities
	var st activities.RolloutState
	rvs := make(map[string]string, len(r.state.ReplicaSets))
	for _, rs := range r.state.ReplicaSets {
		rvs[rs.Name] = rs.ResourceVersion
	}
	err := workflow.ExecuteActivity(r.waitCtx(waitCtx, timeout), a.WaitForChange, activities.WaitForChangeInput{
		ServiceRef:       r.ref,
		Digest:           r.state.Digest,
		Timeout:          timeout,
		ResourceVersions: rvs,
	}).Get(r.ctx, &st)
	if temporal.IsCanceledError(err) {
		if r.ctx.Err() != nil {
			return err // the rollout itself is cancelled (superseded, torn down)
		}
		return nil // an operator changed the desired state: decide again
	}
	if err != nil {
		return err
	}
	r.state = &st
	return nil
}

// settleControls ends the current workflow task with a tiny durable timer
// if an operator control was handled in it. The server refuses to complete
// a workflow while new events (say, the interrupted wait's result) are
// arriving, and a refused task takes the updates it accepted with it: the
// operator would see "unexpected workflow task failure" for an abort that
// then never happened. Settling first records the update on its own.
func (r *rolloutRun) settleControls() {
	if r.unsettled && r.fewer && workflow.GetInfo(r.ctx).GetCurrentHistoryLength() > r.unsettledAt {
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

// minHistoryEvents is the smallest MaxHistoryEvents a rollout accepts: a
// run must get through its first syncs.
const minHistoryEvents = 20

func (r *rolloutRun) shouldContinueAsNew() bool {
	limit := continueAsNewAfter
	if r.in.MaxHistoryEvents > 0 {
		limit = r.in.MaxHistoryEvents
	}
	info := workflow.GetInfo(r.ctx)
	return (info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > limit) &&
		workflow.AllHandlersFinished(r.ctx)
}

// orLong is done, or, for a run that continues as new inside its gates and
// waits, a history long enough to continue as new (issue 20.8: a canary
// paused for a human with a background analysis every second reached
// Temporal's 51,200-event limit in about a day, and the server terminated
// it).
func (r *rolloutRun) orLong(done func() bool) func() bool {
	return func() bool { return done() || r.long() }
}

// long reports whether this run should leave its wait or gate to continue
// as new.
func (r *rolloutRun) long() bool { return r.continueInGates && r.shouldContinueAsNew() }

// leftForLong reports whether a wait on done ended for a long history
// rather than for done itself: the caller returns not done, and the step's
// loop continues as new with the step's state carried.
func (r *rolloutRun) leftForLong(done func() bool) bool { return !done() && r.long() }

// newWait reports whether a wait is news to tell the webhook: not the same
// wait a run continued as new inside (its Waiting is carried), which would
// notify again on every hand-over.
func (r *rolloutRun) newWait(was, now string) bool { return !r.continueInGates || was != now }

func (r *rolloutRun) carryOver() RolloutInput {
	in := r.in
	in.FewerEvents = r.fewer
	in.Carry = &RolloutCarry{Deployment: *r.d.DeepCopy(), StableRevision: r.stableRevision, Outcome: r.outcome, UndoneTo: r.undoneTo, Canary: r.canary, BlueGreen: r.blueGreen,
		ParentLease: r.parentLease()}
	return in
}

func (r *rolloutRun) result() *RolloutResult {
	res := &RolloutResult{
		Namespace:         r.in.Namespace,
		Service:           r.in.Service,
		Replicas:          r.d.Status.Replicas,
		AvailableReplicas: r.d.Status.AvailableReplicas,
		Outcome:           r.outcome,
		DesiredReplicas:   *r.d.Spec.Replicas,
		RestartedAt:       r.d.Spec.Template.Annotations[RestartedAtAnnotation],
		UndoneTo:          r.undoneTo,
	}
	if newRS := rollout.FindNewReplicaSet(r.d, r.state.ReplicaSets); newRS != nil {
		res.NewReplicaSet = newRS.Name
		res.Revision, _ = rollout.Revision(newRS)
	}
	if b := r.blueGreen; b != nil {
		n := len(r.blueGreenSteps())
		res.BlueGreen = &StepsResult{Steps: n, Completed: min(b.Step, n), Reason: b.Reason}
	}
	if c := r.canary; c != nil {
		res.Canary = &StepsResult{Steps: len(r.in.Steps), Completed: min(c.Step, len(r.in.Steps)), PromotedFull: c.PromotedFull, Reason: c.Reason,
			BackgroundFailed: c.BackgroundFailed}
		if c.PromotedFull > 0 {
			res.Canary.Completed = c.PromotedFull - 1
		}
	}
	return res
}

// RolloutStatus is the "status" query's answer: what `kubectl rollout
// status` and `kubectl get rs` would show, plus the engine's current step.
type RolloutStatus struct {
	Namespace         string                       `json:"namespace"`
	Service           string                       `json:"service"`
	Step              string                       `json:"step"`
	Message           string                       `json:"message,omitempty"`
	Paused            bool                         `json:"paused"`
	Strategy          string                       `json:"strategy"`
	Replicas          int32                        `json:"replicas"`
	UpdatedReplicas   int32                        `json:"updatedReplicas"`
	ReadyReplicas     int32                        `json:"readyReplicas"`
	AvailableReplicas int32                        `json:"availableReplicas"`
	DesiredReplicas   int32                        `json:"desiredReplicas"`
	Revision          int64                        `json:"revision"`
	StableRevision    int64                        `json:"stableRevision"`
	Outcome           string                       `json:"outcome,omitempty"`
	Conditions        []appsv1.DeploymentCondition `json:"conditions,omitempty"`
	ReplicaSets       []ReplicaSetStatus           `json:"replicaSets"`
	// Canary is a canary's step, weight and what it waits for.
	Canary *CanaryStatus `json:"canary,omitempty"`
	// BlueGreen is a blue-green's step and the versions its Services select.
	BlueGreen *BlueGreenStatus `json:"blueGreen,omitempty"`
}

// ReplicaSetStatus is one line of RolloutStatus.ReplicaSets.
type ReplicaSetStatus struct {
	Name      string `json:"name"`
	Revision  int64  `json:"revision"`
	New       bool   `json:"new"`
	Desired   int32  `json:"desired"`
	Current   int32  `json:"current"`
	Ready     int32  `json:"ready"`
	Available int32  `json:"available"`
	Image     string `json:"image,omitempty"`
}

func (r *rolloutRun) status() RolloutStatus {
	st := RolloutStatus{
		Namespace:         r.in.Namespace,
		Service:           r.in.Service,
		Step:              string(r.step),
		Message:           r.msg,
		Paused:            r.d.Spec.Paused,
		Strategy:          string(r.d.Spec.Strategy.Type),
		Replicas:          r.d.Status.Replicas,
		UpdatedReplicas:   r.d.Status.UpdatedReplicas,
		ReadyReplicas:     r.d.Status.ReadyReplicas,
		AvailableReplicas: r.d.Status.AvailableReplicas,
		DesiredReplicas:   *r.d.Spec.Replicas,
		StableRevision:    r.stableRevision,
		Outcome:           r.outcome,
		Conditions:        r.d.Status.Conditions,
		Canary:            r.canaryStatus(),
		BlueGreen:         r.blueGreenStatus(),
	}
	if r.state == nil {
		return st
	}
	newRS := rollout.FindNewReplicaSet(r.d, r.state.ReplicaSets)
	for _, rs := range r.state.ReplicaSets {
		rev, _ := rollout.Revision(rs)
		line := ReplicaSetStatus{
			Name: rs.Name, Revision: rev, New: newRS != nil && rs.UID == newRS.UID,
			Current: rs.Status.Replicas, Ready: rs.Status.ReadyReplicas, Available: rs.Status.AvailableReplicas,
		}
		if rs.Spec.Replicas != nil {
			line.Desired = *rs.Spec.Replicas
		}
		if cs := rs.Spec.Template.Spec.Containers; len(cs) > 0 {
			line.Image = cs[0].Image
		}
		if line.New {
			st.Revision = rev
		}
		st.ReplicaSets = append(st.ReplicaSets, line)
	}
	sort.Slice(st.ReplicaSets, func(i, j int) bool { return st.ReplicaSets[i].Revision > st.ReplicaSets[j].Revision })
	return st
}
