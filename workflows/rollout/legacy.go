package rollout

import (
	"fmt"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/rollout"
	"github.com/deployflow/deployflow/workflows/internal/flow"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// judgesWhereMeasured: the activity that measures judges (runs before it
// judge in the workflow: legacyJudge).
func judgesWhereMeasured(ctx workflow.Context) bool {
	return flow.Gate(ctx, flow.VersionJudgeWhereMeasured)
}

// legacyJudge judges a measurement in workflow code, with expr's full
// language, as runs before judge-where-measured did.
func legacyJudge(a *manifest.Analysis, m *activities.Measurement) analysis.Phase {
	phase, err := analysis.ConditionsOf(a).JudgeLegacy(m.Value)
	if err != nil {
		phase, m.Message = analysis.Inconclusive, err.Error()
	}
	return phase
}

// recordsRestartTime: a restart's time is recorded (a 1 ms timer ends the
// workflow task) before the template it stamps is written; runs before it
// stamped and wrote in one task.
func (r *rolloutRun) recordsRestartTime(ctx workflow.Context) bool {
	return flow.Gate(ctx, flow.VersionDurableBeforeWrite)
}

// waitsQuickly: the rollout was started with QuickWait (by a lease
// workflow since issue 22), so each workflow task's first wait is a quick
// one. No marker: the input says it, and a rollout started before it (or
// by hand without it) waits only in activities, as it always did; its
// continued runs carry the input on. See rollout/calls.go quickWait.
func (r *rolloutRun) waitsQuickly() bool { return r.in.QuickWait }

// legacyPrepare ensures the namespace, defaults the Deployment and reads,
// one local activity each.
func (r *rolloutRun) legacyPrepare() error {
	if err := r.ensureNamespace(); err != nil {
		return err
	}
	if err := r.defaultDeployment(); err != nil {
		return err
	}
	return r.read()
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

// legacyApply performs a plan with one local activity per write, then a read.
func (r *rolloutRun) legacyApply(plan rollout.Plan, uids map[string]types.UID) error {
	var a *activities.Activities
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
