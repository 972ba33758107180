package rollout

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// A blue-green rollout (issue 12.4): the new version comes up beside the
// stable one, serving only the preview Service; promotion scales it to
// full size and switches the active Service to it in one selector change;
// the stable version stays up for the scale-down delay, during which undo
// (or abort) switches the active Service back without creating a pod. The
// ordinary syncs then scale the version no longer selected down.

// The steps of a blue-green, in order (manifest.BlueGreen.Steps): the new
// version at previewReplicaCount, the preview Service selecting it; the
// pre-promotion analysis, if any; promotion (autoPromotionSeconds, or
// deployflow promote); the new version at full size; the active Services
// switched to it; the post-promotion analysis, if any; the scale-down
// delay (undo switches back), after which the old version is scaled down.

// BlueGreenState is a blue-green's progress, carried across
// continue-as-new.
type BlueGreenState struct {
	Step    int             `json:"step"`
	Started time.Time       `json:"started"` // when the step in progress started
	Pinned  bool            `json:"pinned"`  // the active Services select the stable version
	Tally   *analysis.Tally `json:"tally,omitempty"`
	Last    string          `json:"last,omitempty"`    // the analysis's last measurement
	Waiting string          `json:"waiting,omitempty"` // an inconclusive analysis
	Reason  string          `json:"reason,omitempty"`
	// Active and Preview are the versions (pod-template-hashes) the
	// Services were last pinned to.
	Active  string `json:"active,omitempty"`
	Preview string `json:"preview,omitempty"`
	// PromotedEarly: a promote during the pre-promotion analysis promotes
	// too.
	PromotedEarly bool `json:"promotedEarly,omitempty"`
	promote       bool // an operator's promote
}

// isBlueGreen reports whether this rollout runs blue-green: the manifest
// asks for it, and there is a stable version, other than the desired one,
// to switch from.
func (r *rolloutRun) isBlueGreen() bool {
	if r.in.BlueGreen == nil || r.stableRevision == 0 {
		return false
	}
	if newRS := rollout.FindNewReplicaSet(r.d, r.state.ReplicaSets); newRS != nil {
		if rev, _ := rollout.Revision(newRS); rev == r.stableRevision {
			return false
		}
	}
	return true
}

// startBlueGreen decides, for a blue-green service, what to switch from:
// the version its active Service selects (not the newest available one: a
// superseded preview is not promoted by being newest). With a version to
// switch from, the blue-green steps run; without one (a first deploy), the
// Services are unpinned for an ordinary rolling update, and pinned to the
// new version once it is done (pinRolledOut).
func (r *rolloutRun) startBlueGreen() error {
	pins, err := r.pinServices(activities.PinInput{})
	if err != nil {
		return err
	}
	if pins.Active != "" {
		for _, rs := range r.state.ReplicaSets {
			if rs.Labels[manifest.PodTemplateHashLabel] == pins.Active && rs.Status.AvailableReplicas > 0 {
				r.stableRevision, _ = rollout.Revision(rs)
			}
		}
	}
	if r.isBlueGreen() {
		r.blueGreen = &BlueGreenState{Active: pins.Active, Preview: pins.Preview}
		return nil
	}
	if pins.Active != "" || pins.Preview != "" {
		_, err = r.pinServices(activities.PinInput{Unpin: true})
	}
	return err
}

// pinRolledOut pins a blue-green service's Services to the version a
// rollout without blue-green steps (a first deploy, a scale, a rollback)
// ended on, so the next blue-green knows what it switches from.
func (r *rolloutRun) pinRolledOut() error {
	if r.in.BlueGreen == nil || r.blueGreen != nil {
		return nil
	}
	h := r.newHash()
	_, err := r.pinServices(activities.PinInput{Active: h, Preview: h})
	return err
}

// runBlueGreen runs the steps until they are done, an abort or undo
// returns to the stable version, or the history is long (continue as new).
func (r *rolloutRun) runBlueGreen() (continueAsNew bool, err error) {
	b := r.blueGreen
	r.continueInGates = true
	steps := r.blueGreenSteps()
	for b.Step < len(steps) && r.outcome == "" && r.undoneTo == 0 {
		if r.shouldContinueAsNew() {
			return true, nil
		}
		if b.Started.IsZero() {
			b.Started = workflow.Now(r.ctx)
		}
		var done bool
		switch steps[b.Step].Kind {
		case manifest.BlueGreenPreview:
			done, err = r.scaleBlueGreen(r.in.BlueGreen.PreviewReplicas(*r.d.Spec.Replicas), true)
		case manifest.BlueGreenPrePromotion, manifest.BlueGreenPromotion, manifest.BlueGreenPostPromo, manifest.BlueGreenScaleDown:
			if r.in.Revert {
				done = true // back to the last-known-good version: no waits
				break
			}
			switch steps[b.Step].Kind {
			case manifest.BlueGreenPrePromotion:
				done, err = r.blueGreenGate("pre-promotion", r.in.BlueGreen.PrePromotionAnalysis)
			case manifest.BlueGreenPromotion:
				done, err = r.awaitPromotion()
			case manifest.BlueGreenPostPromo:
				done, err = r.blueGreenGate("post-promotion", r.in.BlueGreen.PostPromotionAnalysis)
			default:
				done, err = r.scaleDownDelay()
			}
		case manifest.BlueGreenScaleUp:
			done, err = r.scaleBlueGreen(*r.d.Spec.Replicas, false)
		case manifest.BlueGreenSwitch:
			done, err = true, r.switchTo(r.newHash())
		}
		if err != nil {
			return false, err
		}
		if done && r.outcome == "" && r.undoneTo == 0 {
			r.notify("StepCompleted", fmt.Sprintf("step %d/%d (%s) completed", b.Step+1, len(steps), steps[b.Step].Text))
			b.Step++
			b.Started, b.promote, b.Tally, b.Last, b.Waiting = time.Time{}, false, nil, "", ""
		}
	}
	if r.outcome != "" || r.undoneTo != 0 {
		// Abort or undo: the version they made the desired one again (the
		// stable one) serves at once, with the pods it has; the ordinary
		// syncs scale the other one down.
		return false, r.switchTo(r.newHash())
	}
	return false, nil
}

// switchTo makes version hash the one the active Services select. Through
// a Gateway (the lease's routes, r.in.TrafficRoutes), the routes first
// send every request to the preview Service pinned to hash, and only once
// the Gateway accepted that, the active Service is pinned to it too and
// takes the requests back: the switch is known applied, and no request
// meets a Service between two versions. Without routes it is one
// selector change of the active Services (and the preview's).
func (r *rolloutRun) switchTo(hash string) error {
	if !r.routesTraffic() {
		return r.pin(hash, hash)
	}
	b := r.blueGreen
	if b.Active != hash { // (an abort before the switch has nothing to move)
		if err := r.setTraffic(b.Active, hash, 100); err != nil {
			return err
		}
		b.Preview = hash
	}
	if err := r.setTraffic(hash, hash, 0); err != nil {
		return err
	}
	b.Active = hash
	return nil
}

// scaleBlueGreen is one sync of a scaling step: the new version toward n
// replicas beside the stable version at full size (the preview step first
// pins the active Services to the stable version, then points the preview
// at the new one once its n pods are available). Done once they are.
func (r *rolloutRun) scaleBlueGreen(n int32, preview bool) (bool, error) {
	b := r.blueGreen
	if !b.Pinned {
		// Before a pod of the new version exists: the active Services
		// select only the stable version from now until the switch.
		if err := r.pin(r.stableHash(), r.stableHash()); err != nil {
			return false, err
		}
		b.Pinned = true
	}
	s, created, err := r.readSides()
	if created || err != nil {
		return false, err
	}
	newRS, stable := s.newRS, s.stable
	scales := r.scaleOthersDown(s)
	if *stable.Spec.Replicas != s.replicas {
		scales = append(scales, r.sideScale(stable, s.replicas, s, "stable"))
	}
	if *newRS.Spec.Replicas != n {
		scales = append(scales, r.sideScale(newRS, n, s, "new"))
	}
	what := "preview"
	if !preview {
		what = "new version"
	}
	r.step, r.msg = rollout.Step("BlueGreen"), fmt.Sprintf("%s: %d of %d replicas of the new version available; stable at %d", what, newRS.Status.AvailableReplicas, n, stable.Status.AvailableReplicas)
	if len(scales) > 0 {
		return false, r.apply(rollout.Plan{Scales: scales})
	}
	if newRS.Status.AvailableReplicas >= n && newRS.Status.Replicas == n {
		if preview {
			return true, r.pin("", r.newHash())
		}
		return true, nil
	}
	// Pods on their way: wait, within the progress deadline.
	waited, err := r.waitForPods(&b.Started)
	if err == nil && !waited {
		b.Reason = fmt.Sprintf("%s: no progress within %ds", what, *r.d.Spec.ProgressDeadlineSeconds)
		r.rollBackToStable(api.OutcomeRolledBack)
		r.notify("Failed", b.Reason+"; returning to the stable revision")
	}
	return false, err
}

// awaitPromotion waits for autoPromotionSeconds (0: for promote), or for
// promote, abort or undo.
func (r *rolloutRun) awaitPromotion() (bool, error) {
	b := r.blueGreen
	r.step, r.msg = rollout.Step("BlueGreen"), "preview up: awaiting promotion"
	if b.PromotedEarly {
		return true, nil
	}
	woken := func() bool { return b.promote || r.outcome != "" || r.undoneTo != 0 }
	auto := time.Duration(r.in.BlueGreen.AutoPromotionSeconds) * time.Second
	if auto <= 0 {
		r.notify("Paused", fmt.Sprintf("step %d/%d: the preview is up; paused until promoted (deployflow promote)", b.Step+1, len(r.blueGreenSteps())))
		err := workflow.Await(r.ctx, r.orLong(woken))
		if r.leftForLong(woken) {
			return false, err
		}
		return err == nil, err
	}
	left := b.Started.Add(auto).Sub(workflow.Now(r.ctx))
	if left <= 0 {
		return true, nil
	}
	_, err := workflow.AwaitWithTimeout(r.ctx, left, r.orLong(woken))
	if r.leftForLong(woken) && workflow.Now(r.ctx).Before(b.Started.Add(auto)) {
		return false, err
	}
	return err == nil, err
}

// blueGreenGate runs a pre- or post-promotion analysis: passed goes on;
// failed aborts (the active Service selects the stable version again);
// inconclusive waits for a human (promote goes on, abort returns). Promote
// during the analysis skips it.
func (r *rolloutRun) blueGreenGate(which string, a *manifest.Analysis) (bool, error) {
	b := r.blueGreen
	if b.Tally == nil {
		b.Tally = &analysis.Tally{}
	}
	r.step, r.msg = rollout.Step("BlueGreen"), which+" analysis"
	stop := func() bool { return b.promote || r.outcome != "" || r.undoneTo != 0 }
	verdict, err := r.runGate(a, b.Tally, &b.Last, stop)
	if err != nil {
		return false, err
	}
	switch verdict {
	case analysis.Running:
		if b.promote && which == "pre-promotion" {
			b.PromotedEarly = true // one promote: past the analysis and the promotion
		}
		return b.promote, nil
	case analysis.Failed:
		b.Reason = fmt.Sprintf("%s analysis failed: %s (last: %s)", which, b.Tally, b.Last)
		workflow.GetLogger(r.ctx).Warn("blue-green aborted", "service", r.in.Service, "reason", b.Reason)
		r.rollBackToStable(api.OutcomeAborted)
		r.msg = b.Reason
		r.notify("Aborted", b.Reason+"; the active Service selects the stable version again")
		return false, nil
	case analysis.Inconclusive:
		waiting := fmt.Sprintf("%s analysis inconclusive: %s (last: %s); promote to go on, abort to return to stable", which, b.Tally, b.Last)
		if r.newWait(b.Waiting, waiting) {
			r.notify("Paused", waiting)
		}
		b.Waiting = waiting
		err := workflow.Await(r.ctx, r.orLong(stop))
		return b.promote, err
	}
	return true, nil
}

// scaleDownDelay keeps the old version up for the delay; an undo or abort
// in it ends the steps (runBlueGreen switches back).
func (r *rolloutRun) scaleDownDelay() (bool, error) {
	b := r.blueGreen
	delay := time.Duration(r.in.BlueGreen.ScaleDownDelay()) * time.Second
	left := b.Started.Add(delay).Sub(workflow.Now(r.ctx))
	r.step, r.msg = rollout.Step("BlueGreen"), "switched: the old version stays up until the scale-down delay ends (undo switches back)"
	if left <= 0 {
		return true, nil
	}
	ended := func() bool { return r.outcome != "" || r.undoneTo != 0 }
	_, err := workflow.AwaitWithTimeout(r.ctx, left, r.orLong(ended))
	if r.leftForLong(ended) && workflow.Now(r.ctx).Before(b.Started.Add(delay)) {
		return false, err
	}
	return err == nil, err
}

// pin points the service's active Services at version active and its
// preview at preview (pod-template-hashes; "" leaves them).
func (r *rolloutRun) pin(active, preview string) error {
	if _, err := r.pinServices(activities.PinInput{Active: active, Preview: preview}); err != nil {
		return err
	}
	if b := r.blueGreen; b != nil {
		if active != "" {
			b.Active = active
		}
		if preview != "" {
			b.Preview = preview
		}
	}
	return nil
}

// stableHash is the stable revision's pod-template-hash.
func (r *rolloutRun) stableHash() string {
	for _, rs := range r.state.ReplicaSets {
		if rev, _ := rollout.Revision(rs); rev == r.stableRevision {
			return rs.Labels[manifest.PodTemplateHashLabel]
		}
	}
	return ""
}

// newHash is the desired template's pod-template-hash, as its ReplicaSet
// carries it.
func (r *rolloutRun) newHash() string {
	if rs := rollout.FindNewReplicaSet(r.d, r.state.ReplicaSets); rs != nil {
		return rs.Labels[manifest.PodTemplateHashLabel]
	}
	return rollout.ComputeHash(&r.d.Spec.Template, r.d.Status.CollisionCount)
}

// blueGreenSteps are the steps, as the plan and status say them.
func (r *rolloutRun) blueGreenSteps() []manifest.BlueGreenStep {
	image := ""
	if cs := r.d.Spec.Template.Spec.Containers; len(cs) > 0 {
		image = cs[0].Image
	}
	return r.in.BlueGreen.Steps(r.in.Service, image, *r.d.Spec.Replicas)
}
