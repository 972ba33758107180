package rollout

import (
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// What a rollout shows: the status query's answer and the workflow's
// result.

func (r *rolloutRun) result() *api.RolloutResult {
	res := &api.RolloutResult{
		Namespace:         r.in.Namespace,
		Service:           r.in.Service,
		Replicas:          r.d.Status.Replicas,
		AvailableReplicas: r.d.Status.AvailableReplicas,
		Outcome:           r.outcome,
		DesiredReplicas:   *r.d.Spec.Replicas,
		RestartedAt:       r.d.Spec.Template.Annotations[api.RestartedAtAnnotation],
		UndoneTo:          r.undoneTo,
	}
	if newRS := rollout.FindNewReplicaSet(r.d, r.state.ReplicaSets); newRS != nil {
		res.NewReplicaSet = newRS.Name
		res.Revision, _ = rollout.Revision(newRS)
	}
	if b := r.blueGreen; b != nil {
		n := len(r.blueGreenSteps())
		res.BlueGreen = &api.StepsResult{Steps: n, Completed: min(b.Step, n), Reason: b.Reason}
	}
	if c := r.canary; c != nil {
		res.Canary = &api.StepsResult{Steps: len(r.in.Steps), Completed: min(c.Step, len(r.in.Steps)), PromotedFull: c.PromotedFull, Reason: c.Reason,
			BackgroundFailed: c.BackgroundFailed}
		if c.PromotedFull > 0 {
			res.Canary.Completed = c.PromotedFull - 1
		}
	}
	return res
}

func (r *rolloutRun) status() api.RolloutStatus {
	st := api.RolloutStatus{
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
		line := api.ReplicaSetStatus{
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

// blueGreenStatus is the status query's blue-green view.
func (r *rolloutRun) blueGreenStatus() *api.BlueGreenStatus {
	b := r.blueGreen
	if b == nil {
		return nil
	}
	steps := r.blueGreenSteps()
	st := &api.BlueGreenStatus{Step: b.Step + 1, Steps: len(steps), Active: b.Active, Preview: b.Preview, Reason: b.Reason}
	for _, s := range steps {
		st.List = append(st.List, s.Text)
	}
	switch {
	case b.Reason != "":
		st.Summary = "aborted: " + b.Reason
	case r.undoneTo != 0:
		st.Summary = fmt.Sprintf("undone: the active Service selects revision %d again", r.undoneTo)
	case r.outcome != "":
		st.Summary = "aborted: the active Service selects the stable version again"
	case b.Step >= len(steps):
		st.Summary = "switched: scaling the old version down"
	default:
		st.Summary = fmt.Sprintf("step %d/%d: %s", st.Step, st.Steps, st.List[b.Step])
		if b.Waiting != "" {
			st.Summary += ": " + b.Waiting
		} else if b.Tally != nil && b.Tally.Measured > 0 {
			st.Summary += fmt.Sprintf(": %s (last: %s)", b.Tally, b.Last)
		}
		var d time.Duration
		switch steps[b.Step].Kind {
		case manifest.BlueGreenPromotion:
			d = time.Duration(r.in.BlueGreen.AutoPromotionSeconds) * time.Second
		case manifest.BlueGreenScaleDown:
			d = time.Duration(r.in.BlueGreen.ScaleDownDelay()) * time.Second
		}
		if d > 0 && !b.Started.IsZero() {
			left := b.Started.Add(d).Sub(workflow.Now(r.ctx)).Round(time.Second)
			st.Summary += fmt.Sprintf(" (%s left)", max(left, 0))
		}
	}
	return st
}

// canaryStatus is the status query's canary view.
func (r *rolloutRun) canaryStatus() *api.CanaryStatus {
	c := r.canary
	if c == nil || len(r.in.Steps) == 0 {
		return nil
	}
	st := &api.CanaryStatus{Step: c.Step + 1, Steps: len(r.in.Steps), Weight: c.Weight, Reason: c.Reason}
	for _, s := range r.in.Steps {
		st.List = append(st.List, s.String())
	}
	switch {
	case c.Reason != "":
		st.Summary = "aborted: " + c.Reason
	case c.Promoted || c.Step >= len(r.in.Steps):
		st.Summary = "promoted: finishing the rollout"
	default:
		step := r.in.Steps[c.Step]
		st.Summary = fmt.Sprintf("step %d/%d: %s", st.Step, st.Steps, step)
		if p := step.Pause; p != nil {
			if p.PauseDuration() > 0 && !c.Started.IsZero() {
				left := c.Started.Add(p.PauseDuration()).Sub(workflow.Now(r.ctx)).Round(time.Second)
				st.Summary = fmt.Sprintf("step %d/%d: pause %s left", st.Step, st.Steps, max(left, 0))
			}
		} else if c.Waiting != "" {
			st.Summary += ": " + c.Waiting
		}
		if c.Tally != nil && c.Tally.Measured > 0 && c.Waiting == "" {
			st.Summary += fmt.Sprintf(": %s (last: %s)", c.Tally, c.Last)
		}
	}
	return st
}
