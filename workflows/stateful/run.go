package stateful

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/k8s/statefulset"
)

// run is one StatefulSetRolloutWorkflow run's state. Only the workflow
// goroutine and its update handlers touch it (Temporal runs them one at a
// time). The exported fields are what a continued run carries.
type run struct {
	ctx     workflow.Context
	in      api.StatefulSetRolloutInput
	ref     activities.StatefulSetRef
	state   *activities.StatefulSetState // the cluster as last read
	step    statefulset.Step             // the last decision
	target  int32                        // the partition the current step goes down to
	carried bool

	// Stable is the ControllerRevision the pods ran before this rollout:
	// what an abort or autoRollback returns them to ("" for a new
	// StatefulSet: nothing to return to).
	Stable string
	// StableHash is the template hash Stable was applied with (written
	// back with it, so that the same manifest deployed again is no change).
	StableHash string
	// StepIndex counts the canary steps done.
	StepIndex int
	// Outcome is set once an abort or autoRollback took over.
	Outcome string
	// Reverting: the template is Stable's again (an abort, autoRollback,
	// or a lease's return to its last-known-good manifest); pods of the
	// other revision that never turned Ready are deleted.
	Reverting bool
	Paused    bool
	// ProgressAt is when a step last made progress (an ordinal released,
	// or one more on the update revision and available); Updated is how
	// many were then.
	ProgressAt  time.Time
	Updated     int32
	ParentLease string
	// Tally is the analysis step's measurements so far; Measured the last
	// one, as the status shows it; Held why an inconclusive analysis holds
	// the rollout for a human; Reason why it aborted (a failed analysis).
	Tally    *analysis.Tally
	Measured string
	Held     string
	Reason   string
	// Background is the background analysis's measurements so far, and
	// BackgroundMeasured its last one.
	Background         *analysis.Tally
	BackgroundMeasured string
	BackgroundHeld     string

	abort     bool      // an operator (or a failed analysis) asked to abort
	promote   bool      // an operator asked a pause or analysis step to end
	gate      string    // the step promote ends: "pause" or "analysis" ("" none)
	jobs      int       // analysis Jobs this run started (their names)
	pauseEnds time.Time // when a timed pause step ends (carried)
	msg       string    // the last control's word, for the status
	unsettled bool      // a control was handled in this workflow task
	wake      workflow.CancelFunc
}

func newRun(ctx workflow.Context, in api.StatefulSetRolloutInput, c *carry) *run {
	r := &run{ctx: ctx, in: in, ref: activities.StatefulSetRef{Namespace: in.Namespace, Name: in.Service}, carried: c != nil}
	r.ParentLease = parentLease(ctx)
	r.Reverting = in.Revert
	if c != nil {
		r.Stable, r.StableHash, r.StepIndex, r.Outcome, r.Paused = c.Stable, c.StableHash, c.StepIndex, c.Outcome, c.Paused
		r.ProgressAt, r.Updated, r.Reverting, r.pauseEnds = c.ProgressAt, c.Updated, c.Reverting, c.PauseEnds
		r.Tally, r.Measured, r.Held, r.Reason = c.Tally, c.Measured, c.Held, c.Reason
		r.Background, r.BackgroundMeasured, r.BackgroundHeld = c.Background, c.BackgroundMeasured, c.BackgroundHeld
		r.abort, r.promote = c.Abort, c.Promote
		if r.ParentLease == "" {
			r.ParentLease = c.ParentLease
		}
	}
	return r
}

// result is what the rollout reports when it ends.
func (r *run) result() *api.RolloutResult {
	res := &api.RolloutResult{Namespace: r.in.Namespace, Service: r.in.Service}
	if r.state != nil {
		res.Replicas = r.state.Replicas
		res.DesiredReplicas = r.state.Replicas
		res.AvailableReplicas = r.step.Updated
		res.NewReplicaSet = r.state.UpdateRevision
	}
	if n := len(r.in.Steps); n > 0 && !r.in.Revert {
		res.Canary = &api.StepsResult{Steps: n, Completed: min(r.StepIndex, n)}
	}
	return res
}

// status is the "status" query's answer.
func (r *run) status() api.RolloutStatus {
	st := api.RolloutStatus{Namespace: r.in.Namespace, Service: r.in.Service, Strategy: "StatefulSet",
		Step: "Wait", Message: r.msg, Paused: r.Paused, Outcome: r.Outcome}
	if r.step.Reached && r.target == 0 {
		st.Step = "Complete"
	}
	switch {
	case r.BackgroundHeld != "":
		st.Message = r.BackgroundHeld
	case r.Held != "":
		st.Message = r.Held
	case r.gate == "analysis":
		st.Message = "analysis: " + r.Measured
	case r.step.Waiting != "":
		st.Message = "waiting for " + r.step.Waiting
	}
	if r.state != nil {
		st.Replicas, st.DesiredReplicas, st.UpdatedReplicas = r.state.Replicas, r.state.Replicas, r.step.Updated
		for _, p := range r.state.Pods {
			if p.Ready {
				st.ReadyReplicas++
			}
			if p.Available {
				st.AvailableReplicas++
			}
		}
		st.StatefulSet = &api.StatefulSetStatus{Partition: r.state.Partition, Target: r.target,
			UpdateRevision: r.state.UpdateRevision, CurrentRevision: r.state.CurrentRevision, StableRevision: r.Stable,
			Claims: r.state.ClaimCount}
	}
	if n := len(r.in.Steps); n > 0 && !r.in.Revert {
		st.Canary = &api.CanaryStatus{Step: r.StepIndex + 1, Steps: n, Reason: r.Reason}
	}
	return st
}
