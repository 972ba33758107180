package workflows

import (
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// What a rollout shows: the status query's answer and the workflow's
// result.

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

// BlueGreenStatus is the status query's view of a blue-green.
type BlueGreenStatus struct {
	Step    int      `json:"step"` // 1-based; Steps+1 once done
	Steps   int      `json:"steps"`
	Summary string   `json:"summary"` // "step 2/5: await promotion (automatic in 12s)"
	List    []string `json:"list"`
	Active  string   `json:"active,omitempty"`  // the pod-template-hash the active Services select
	Preview string   `json:"preview,omitempty"` // and the preview
	Reason  string   `json:"reason,omitempty"`
}

// blueGreenStatus is the status query's blue-green view.
func (r *rolloutRun) blueGreenStatus() *BlueGreenStatus {
	b := r.blueGreen
	if b == nil {
		return nil
	}
	steps := r.blueGreenSteps()
	st := &BlueGreenStatus{Step: b.Step + 1, Steps: len(steps), Active: b.Active, Preview: b.Preview, Reason: b.Reason}
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

// CanaryStatus is the status query's view of a canary.
type CanaryStatus struct {
	Step    int      `json:"step"` // 1-based; Steps+1 once the steps are done
	Steps   int      `json:"steps"`
	Weight  int32    `json:"weight"`
	Summary string   `json:"summary"` // "step 3/7: pause 4m12s left"
	List    []string `json:"list"`    // every step, as the manifest says it
	Reason  string   `json:"reason,omitempty"`
}

// canaryStatus is the status query's canary view.
func (r *rolloutRun) canaryStatus() *CanaryStatus {
	c := r.canary
	if c == nil || len(r.in.Steps) == 0 {
		return nil
	}
	st := &CanaryStatus{Step: c.Step + 1, Steps: len(r.in.Steps), Weight: c.Weight, Reason: c.Reason}
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
