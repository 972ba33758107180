package rollout

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/canary"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// A canary (issue 12.2) runs the manifest's steps before the rollout's
// ordinary syncs: each setWeight moves that share of the replicas to the
// new version (k8s/canary's arithmetic, within maxSurge/maxUnavailable),
// each pause waits for its time or for promote, each analysis measures and
// judges (internal/analysis). Once the steps are done (or on promote
// --full) the ordinary RollingUpdate syncs finish the rollout to 100%; an
// abort, a failed analysis or no progress within the deadline makes the
// stable revision the desired one again (as undo does), and the same syncs
// bring it back up before they take the canary down.

// CanaryState is a canary's progress through its steps; it carries over
// continue-as-new.
type CanaryState struct {
	Step     int       `json:"step"`               // index of the step in progress
	Weight   int32     `json:"weight"`             // the last setWeight reached or in progress
	Started  time.Time `json:"started"`            // when the step in progress started
	Promoted bool      `json:"promoted,omitempty"` // promote --full: no more steps
	// PromotedFull is the step (1-based) a promote --full skipped the rest from.
	PromotedFull int             `json:"promotedFull,omitempty"`
	Tally        *analysis.Tally `json:"tally,omitempty"` // the analysis in progress
	// Waiting says what the step waits for (a pause, an inconclusive
	// analysis), Last the last measurement, Reason why it aborted.
	Waiting string `json:"waiting,omitempty"`
	Last    string `json:"last,omitempty"`
	Reason  string `json:"reason,omitempty"`
	promote bool   // an operator's promote of the step in progress
	// abortedByOperator: the abort update was taken, not yet notified.
	abortedByOperator bool
	// Background is the background analysis's tally, BackgroundLast its
	// last measurement; BackgroundFailed says why it aborts the canary,
	// Held why it holds it (inconclusive) before its next step.
	Background       *analysis.Tally `json:"background,omitempty"`
	BackgroundLast   string          `json:"backgroundLast,omitempty"`
	BackgroundFailed string          `json:"backgroundFailed,omitempty"`
	Held             string          `json:"held,omitempty"`
	// Scale is the last setCanaryScale, until matchTrafficWeight.
	Scale *manifest.CanaryScale `json:"scale,omitempty"`
	// TrafficSettled: through a Gateway, the steps' last split was set and
	// the scale-down delay after it has passed (traffic.go).
	TrafficSettled bool `json:"trafficSettled,omitempty"`
}

// moveOn is what ends a canary's wait: a promote, an abort, or a failed
// background analysis.
func (c *CanaryState) moveOn(r *rolloutRun) func() bool {
	return func() bool { return c.promote || c.Promoted || r.outcome != "" || c.BackgroundFailed != "" }
}

// isCanary reports whether this rollout runs canary steps: it has steps,
// something stable to compare with, and a template that is not it.
func (r *rolloutRun) isCanary() bool {
	if len(r.in.Steps) == 0 || r.stableRevision == 0 || r.in.Revert {
		return false
	}
	if newRS := rollout.FindNewReplicaSet(r.d, r.state.ReplicaSets); newRS != nil {
		if rev, _ := rollout.Revision(newRS); rev == r.stableRevision {
			return false
		}
	}
	return true
}

// runCanary runs the steps from the one in progress. It returns when they
// are done, promoted, or aborted (r.outcome set); continueAsNew when the
// history is long.
func (r *rolloutRun) runCanary() (continueAsNew bool, err error) {
	c := r.canary
	r.continueInGates = true
	r.startBackground()
	for c.Step < len(r.in.Steps) && !c.Promoted && r.outcome == "" {
		if r.long() {
			return true, nil // inside a step: its state is carried
		}
		if c.BackgroundFailed != "" {
			r.abortCanary(api.OutcomeAborted, c.BackgroundFailed)
			break
		}
		if c.Held != "" {
			// An inconclusive background analysis: a human decides.
			if r.newWait(c.Waiting, c.Held) {
				r.notify("Paused", fmt.Sprintf("step %d/%d: %s", c.Step+1, len(r.in.Steps), c.Held))
			}
			c.Waiting = c.Held
			if err := workflow.Await(r.ctx, r.orLong(c.moveOn(r))); err != nil {
				return false, err
			}
			if r.leftForLong(c.moveOn(r)) {
				continue // held still, in the continued run
			}
			if c.promote { // go on, with a fresh background tally
				c.promote, c.Background = false, &analysis.Tally{}
			}
			c.Held, c.Waiting = "", ""
			continue
		}
		if r.shouldContinueAsNew() {
			return true, nil
		}
		if c.Started.IsZero() {
			c.Started = workflow.Now(r.ctx)
		}
		step := r.in.Steps[c.Step]
		var done bool
		switch {
		case step.SetWeight != nil:
			c.Weight = *step.SetWeight
			done, err = r.scaleCanary()
		case step.SetCanaryScale != nil:
			c.Scale = step.SetCanaryScale
			if c.Scale.MatchTrafficWeight {
				c.Scale = nil
			}
			done, err = r.scaleCanary()
		case step.Pause != nil:
			done, err = r.pause(step.Pause)
		case step.Analysis != nil:
			done, err = r.analyze(step.Analysis)
		}
		if err != nil {
			return false, err
		}
		if r.outcome != "" {
			break // aborted: abortCanary notified
		}
		if c.BackgroundFailed != "" {
			continue // aborted at the top of the loop
		}
		if done || c.promote {
			event, what := "StepCompleted", "completed"
			if c.promote {
				event, what = "Promoted", "promoted"
			}
			r.notify(event, fmt.Sprintf("step %d/%d (%s) %s", c.Step+1, len(r.in.Steps), step, what))
			c.Step++
			c.Started, c.Waiting, c.Tally, c.promote = time.Time{}, "", nil, false
		}
	}
	if c.abortedByOperator {
		c.abortedByOperator = false
		r.notify("Aborted", "aborted by an operator; returning to the stable revision")
	}
	if c.Promoted && r.outcome == "" && c.Step < len(r.in.Steps) {
		r.notify("Promoted", fmt.Sprintf("promoted past every step from %d/%d: finishing the rollout", c.Step+1, len(r.in.Steps)))
		c.PromotedFull = c.Step + 1
		c.Step = len(r.in.Steps)
	}
	return r.fullWeight()
}

// fullWeight is, through a Gateway, the canary's last step once its steps
// are done: the new version at every replica beside the stable one, then
// every request to it (setTraffic), before the syncs scale the stable
// version down. Without a Gateway, or aborted, there is nothing to do.
func (r *rolloutRun) fullWeight() (continueAsNew bool, err error) {
	c := r.canary
	if !r.routesTraffic() || r.outcome != "" || c.Weight == 100 && c.Started.IsZero() {
		return false, nil
	}
	if c.Weight != 100 {
		c.Weight, c.Scale, c.Started = 100, nil, workflow.Now(r.ctx)
	}
	for r.outcome == "" {
		if r.long() || r.shouldContinueAsNew() {
			return true, nil // its state is carried
		}
		done, err := r.scaleCanary()
		if err != nil || done {
			if done {
				c.Started = time.Time{}
			}
			return false, err
		}
	}
	return false, nil
}

// scaleCanary is one sync of a setWeight step: create the canary
// ReplicaSet if needed, scale toward the step's split, or wait for pods.
// Done once both sides are at the split with every pod available.
func (r *rolloutRun) scaleCanary() (bool, error) {
	s, created, err := r.readSides()
	if created || err != nil {
		return false, err
	}
	newRS, stable := s.newRS, s.stable
	scales := r.scaleOthersDown(s)
	want := canary.SplitFor(s.replicas, r.canary.Weight, s.surge)
	if c := r.canary.Scale; c != nil {
		want = canary.ScaleFor(s.replicas, c.Replicas, c.Weight)
	}
	canarySide := canary.ReplicaSet{Replicas: *newRS.Spec.Replicas, Available: newRS.Status.AvailableReplicas}
	stableSide := canary.ReplicaSet{Replicas: *stable.Spec.Replicas, Available: stable.Status.AvailableReplicas}
	canarySide, stableSide = canary.Counted(canarySide), canary.Counted(stableSide)
	next := canary.Step(s.replicas, s.surge, s.unavailable, canarySide, stableSide, want)
	if r.routesTraffic() {
		// Through a Gateway the weight is the route's (traffic.go): the
		// stable version keeps every replica, as Argo Rollouts' does with
		// traffic routing, so no request meets a pod going away, and the
		// canary runs its share beside it.
		want.Stable = s.replicas
		next = want
	}
	if next.Canary != *newRS.Spec.Replicas {
		scales = append(scales, r.sideScale(newRS, next.Canary, s, "canary"))
	}
	if next.Stable != *stable.Spec.Replicas {
		scales = append(scales, r.sideScale(stable, next.Stable, s, "stable"))
	}
	r.step, r.msg = rollout.Step("Canary"), fmt.Sprintf("setWeight %d%%: %d canary, %d stable", r.canary.Weight, want.Canary, want.Stable)
	if len(scales) > 0 {
		return false, r.apply(rollout.Plan{Scales: scales})
	}
	if newRS.Status.AvailableReplicas >= want.Canary && stable.Status.AvailableReplicas >= want.Stable &&
		newRS.Status.Replicas == want.Canary && stable.Status.Replicas == want.Stable {
		// The pods are up: through a Gateway, the requests follow.
		if r.routesTraffic() {
			r.msg += fmt.Sprintf("; %d%% of requests to the canary", r.canary.Weight)
		}
		return true, r.setTraffic(r.stableHash(), r.newHash(), r.canary.Weight)
	}
	// Pods on their way: wait, within the progress deadline.
	waited, err := r.waitForPods(&r.canary.Started)
	if err == nil && !waited {
		r.abortCanary(api.OutcomeRolledBack, fmt.Sprintf("setWeight %d%%: no progress within %ds", r.canary.Weight, *r.d.Spec.ProgressDeadlineSeconds))
	}
	return false, err
}

// pause waits for its duration, or for promote (or abort).
func (r *rolloutRun) pause(p *manifest.Pause) (bool, error) {
	d := p.PauseDuration()
	if d == 0 {
		if r.newWait(r.canary.Waiting, "paused until promoted") {
			r.notify("Paused", fmt.Sprintf("step %d/%d: paused until promoted (deployflow promote)", r.canary.Step+1, len(r.in.Steps)))
		}
		r.canary.Waiting = "paused until promoted"
		err := workflow.Await(r.ctx, r.orLong(r.canary.moveOn(r)))
		if r.leftForLong(r.canary.moveOn(r)) {
			return false, err
		}
		return err == nil, err
	}
	r.canary.Waiting = "paused"
	left := r.canary.Started.Add(d).Sub(workflow.Now(r.ctx))
	if left <= 0 {
		return true, nil
	}
	_, err := workflow.AwaitWithTimeout(r.ctx, left, r.orLong(r.canary.moveOn(r)))
	if r.leftForLong(r.canary.moveOn(r)) && workflow.Now(r.ctx).Before(r.canary.Started.Add(d)) {
		return false, err // the rest of the pause in the continued run (Started is carried)
	}
	return err == nil, err
}

// analyze takes the analysis's measurements, interval apart, and judges
// them: passed goes on; failed aborts; inconclusive pauses for a human.
func (r *rolloutRun) analyze(a *manifest.Analysis) (bool, error) {
	c := r.canary
	if c.Tally == nil {
		c.Tally = &analysis.Tally{}
	}
	verdict, err := r.runGate(a, c.Tally, &c.Last, c.moveOn(r))
	if err != nil {
		return false, err
	}
	switch verdict {
	case analysis.Running:
		return false, nil // promoted past the analysis, or aborted
	case analysis.Failed:
		r.abortCanary(api.OutcomeAborted, fmt.Sprintf("analysis failed: %s (last: %s)", c.Tally, c.Last))
		return false, nil
	case analysis.Inconclusive:
		waiting := fmt.Sprintf("analysis inconclusive: %s (last: %s); promote to go on, abort to return to stable", c.Tally, c.Last)
		if r.newWait(c.Waiting, waiting) {
			r.notify("Paused", fmt.Sprintf("step %d/%d: %s", c.Step+1, len(r.in.Steps), waiting))
		}
		c.Waiting = waiting
		err := workflow.Await(r.ctx, r.orLong(c.moveOn(r)))
		return false, err
	}
	return true, nil
}

// abortCanary makes the stable revision the desired one again; the
// ordinary syncs then scale it back up first and the canary down.
func (r *rolloutRun) abortCanary(outcome, reason string) {
	r.canary.Reason = reason
	r.canary.Waiting = ""
	workflow.GetLogger(r.ctx).Warn("canary aborted", "service", r.in.Service, "reason", reason)
	r.rollBackToStable(outcome)
	r.msg = reason
	event := "Aborted"
	if outcome == api.OutcomeRolledBack {
		event = "Failed"
	}
	r.notify(event, reason+"; returning to the stable revision")
}
