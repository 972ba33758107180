package rollout

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/k8s/rollout"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// Where a rollout touches the cluster: its local activities and the wait
// for a change, each with its options. The decisions are in
// rollout/engine.go (k8s/rollout's Sync) and the strategy files.

// prepare ensures the namespace (usable for pods), replaces the desired
// Deployment by the API server's defaulted version of it, so the
// pod-template-hash matches the cluster's, and reads what runs of the
// service. A continued run has done the first two.
func (r *rolloutRun) prepare() error {
	switch {
	case r.in.Carry != nil:
		return r.read()
	case !r.Batches():
		return r.legacyPrepare()
	}
	var a *activities.Activities
	var res activities.PrepareRolloutResult
	if err := workflow.ExecuteLocalActivity(flow.KubeSteps(r.ctx, "ensure namespace, default "+r.in.Service+", read"), a.PrepareRollout,
		activities.PrepareRolloutInput{Namespace: r.namespace(), Deployment: r.d, Ref: r.ref}).Get(r.ctx, &res); err != nil {
		return err
	}
	r.d, r.state = res.Deployment, &res.State
	return nil
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
// it continues (its carry is the workflow's own: lease/guard.go).
func (r *rolloutRun) parentLease() string {
	if p := workflow.GetInfo(r.ctx).ParentWorkflowExecution; p != nil {
		if lease, _, ok := api.LeaseOfWorkflowID(p.ID); ok {
			return lease
		}
		return ""
	}
	if r.in.Carry != nil {
		return r.in.Carry.ParentLease
	}
	return ""
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
	if !r.Batches() {
		return r.legacyApply(plan, uids)
	}
	in := activities.ApplyPlanInput{Ref: r.ref, Update: plan.Update, Scales: plan.Scales, Deletes: plan.Deletes, UIDs: uids}
	if plan.Create != nil {
		in.Create = plan.Create.DeepCopy()
		in.Create.Labels[activities.ServiceLabel] = r.in.Service
	}
	var res activities.ApplyPlanResult
	if err := workflow.ExecuteLocalActivity(flow.KubeSteps(r.ctx, planSummary(plan)), a.ApplyPlan, in).Get(r.ctx, &res); err != nil {
		return err
	}
	r.state = &res.State
	return nil

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
	if r.quickWaits(timeout) {
		changed, waited := r.quickWait()
		if changed {
			return nil
		}
		timeout -= waited
	}
	waitCtx, cancel := workflow.WithCancel(r.ctx)
	r.wake = cancel
	defer func() { r.wake = nil }()

	var a *activities.Activities
	var st activities.RolloutState
	err := workflow.ExecuteActivity(flow.WaitCall(waitCtx, timeout, "wait for "+r.in.Service+" to change"), a.WaitForChange, activities.WaitForChangeInput{
		ServiceRef:       r.ref,
		Digest:           r.state.Digest,
		Timeout:          timeout,
		ResourceVersions: r.resourceVersions(),
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

// quickWaits reports whether this wait begins with a quick one: the
// rollout was started with QuickWait, no quick wait ran in this workflow
// task yet (one per task: each holds it), and the wait would outlast one.
func (r *rolloutRun) quickWaits(timeout time.Duration) bool {
	return r.waitsQuickly() && timeout > flow.QuickWaitFor &&
		r.quickTask != workflow.GetInfo(r.ctx).GetCurrentHistoryLength()
}

// quickWait waits for a change in a local activity of at most flow.QuickWaitFor
// (activities.QuickWait: pods created but not ready do not end it) and
// reports whether it saw one, and how long it waited if not (nothing, when
// the worker ran too many quick waits to take one more). A change found in
// the task that applied the plan saves the wait's activity and the
// workflow task after it. It fails only as "saw nothing": the activity wait
// follows and observes for itself.
func (r *rolloutRun) quickWait() (changed bool, waited time.Duration) {
	r.quickTask = workflow.GetInfo(r.ctx).GetCurrentHistoryLength()
	r.observedAt = time.Time{}
	ctx := flow.QuickWaitCall(r.ctx, "wait up to "+flow.QuickWaitFor.String()+" for "+r.in.Service+" to change")
	var a *activities.Activities
	var st activities.RolloutState
	err := workflow.ExecuteLocalActivity(ctx, a.QuickWait, activities.WaitForChangeInput{
		ServiceRef: r.ref, Timeout: flow.QuickWaitFor, ResourceVersions: r.resourceVersions(), Seen: r.state,
	}).Get(r.ctx, &st)
	switch {
	case err != nil:
		workflow.GetLogger(r.ctx).Info("quick wait failed; waiting in an activity", "service", r.in.Service, "error", err)
		return false, 0
	case st.ObservedAt == nil:
		return false, 0 // the worker was busy: it did not wait
	case st.Digest == r.state.Digest:
		return false, flow.QuickWaitFor
	}
	r.state = &st
	r.observedAt = *st.ObservedAt
	return true, 0
}

// now is the time a sync decides at: the workflow's, or, right after a
// quick wait saw a change in this task, when it saw it (the task's own
// time is from before the wait).
func (r *rolloutRun) now() time.Time {
	now := workflow.Now(r.ctx)
	if r.quickTask == workflow.GetInfo(r.ctx).GetCurrentHistoryLength() && r.observedAt.After(now) {
		return r.observedAt
	}
	return now
}

func (r *rolloutRun) resourceVersions() map[string]string {
	rvs := make(map[string]string, len(r.state.ReplicaSets))
	for _, rs := range r.state.ReplicaSets {
		rvs[rs.Name] = rs.ResourceVersion
	}
	return rvs
}

// pinServices runs PinServices for this rollout's service.
func (r *rolloutRun) pinServices(in activities.PinInput) (*activities.PinResult, error) {
	in.Namespace, in.Service = r.in.Namespace, r.in.Service
	summary := fmt.Sprintf("pin %s: active %s, preview %s", r.in.Service, orDash(in.Active), orDash(in.Preview))
	switch {
	case in.Unpin:
		summary = "unpin " + r.in.Service
	case in.Active == "" && in.Preview == "":
		summary = "read the pins of " + r.in.Service
	}
	var a *activities.Activities
	ctx := flow.PinCall(r.ctx, summary)
	var res activities.PinResult
	err := workflow.ExecuteLocalActivity(ctx, a.PinServices, in).Get(r.ctx, &res)
	return &res, err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// notify tells the worker's webhook (if any) what the canary (or
// blue-green) did; a
// webhook that does not answer delays the canary by its retries at most,
// and never fails it.
func (r *rolloutRun) notify(event, message string) {
	var a *activities.Activities
	ctx := flow.NotifyCall(r.ctx, "notify "+event)
	n := activities.Notification{Time: workflow.Now(r.ctx), Event: event, Namespace: r.in.Namespace, Service: r.in.Service, Message: message}
	switch {
	case r.canary != nil:
		n.Steps, n.Weight = len(r.in.Steps), r.canary.Weight
		if r.canary.Step < len(r.in.Steps) {
			n.Step = r.canary.Step + 1
		}
	case r.blueGreen != nil:
		n.Steps = len(r.blueGreenSteps())
		if r.blueGreen.Step < n.Steps {
			n.Step = r.blueGreen.Step + 1
		}
	}
	if err := workflow.ExecuteLocalActivity(ctx, a.Notify, n).Get(r.ctx, nil); err != nil {
		workflow.GetLogger(r.ctx).Warn("canary notification not delivered", "event", event, "error", err)
	}
}

// kubeCtx is for short, idempotent Kubernetes API calls, run as local
// activities: a whole sync (read, decide, scale, read) then costs one
// workflow task instead of a server round trip per call, which keeps the
// engine as quick as the in-cluster controller. They are retried for a day
// (an API server outage stalls the rollout, it does not fail it); summary
// shows in the UI, e.g. "scale web-5d8f9 3→6".
func (r *rolloutRun) kubeCtx(summary string) workflow.Context { return flow.KubeCall(r.ctx, summary) }
