package stateful

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
)

// defaultProgressDeadline is a Deployment's default, which a stateful
// service's rollout keeps.
const defaultProgressDeadline = 600

// maxProgressDeadline bounds a deadline typed by hand (a day).
const maxProgressDeadline = 24 * 60 * 60

// maxSteps bounds a canary's steps (the lease's manifest has the
// operator's tighter --max-canary-steps).
const maxSteps = 256

// carry is the state a stateful rollout hands to its continued run.
type carry struct {
	Stable             string          `json:"stable"`
	StableHash         string          `json:"stableHash,omitempty"`
	StepIndex          int             `json:"stepIndex"`
	Outcome            string          `json:"outcome,omitempty"`
	Paused             bool            `json:"paused,omitempty"`
	ProgressAt         time.Time       `json:"progressAt"`
	Updated            int32           `json:"updated"`
	Reverting          bool            `json:"reverting,omitempty"`
	PauseEnds          time.Time       `json:"pauseEnds,omitzero"`
	ParentLease        string          `json:"parentLease"`
	Tally              *analysis.Tally `json:"tally,omitempty"`
	Measured           string          `json:"measured,omitempty"`
	Held               string          `json:"held,omitempty"`
	Reason             string          `json:"reason,omitempty"`
	Background         *analysis.Tally `json:"background,omitempty"`
	BackgroundMeasured string          `json:"backgroundMeasured,omitempty"`
	BackgroundHeld     string          `json:"backgroundHeld,omitempty"`
	// Abort and Promote: a control accepted after the run decided to
	// continue as new (in the task that settles it), for the continued run
	// to act on.
	Abort   bool `json:"abort,omitempty"`
	Promote bool `json:"promote,omitempty"`
}

func decodeCarry(in api.StatefulSetRolloutInput) (*carry, error) {
	if !api.HasCarry(in.Carry) {
		return nil, nil
	}
	var c carry
	if err := json.Unmarshal(in.Carry, &c); err != nil {
		return nil, fmt.Errorf("carry: %v: leave it out when starting a rollout", err)
	}
	return &c, nil
}

// guard is what is wrong with the input, or with who started it: only a
// lease's workflow starts a stateful rollout, and only for its own
// namespace (the StatefulSet holds the tenant's volumes, and its
// manifest was validated by that lease). A continued run is its own
// workflow's, with the lease its first run had.
func (r *run) guard(continued bool) error {
	in := r.in
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if r.carried && !continued {
		bad("carry", "is set by the workflow itself when it continues as new; leave it out when starting a rollout")
	}
	switch {
	case r.ParentLease == "":
		bad("(start)", "a stateful rollout is started by its lease's workflow (deployflow deploy), never by hand: its StatefulSet holds the tenant's volumes")
	case manifest.Namespace(r.ParentLease) != in.Namespace:
		bad("namespace", "%q is not lease %s's namespace (%s): a lease's workflow rolls out only its own services", in.Namespace, r.ParentLease, manifest.Namespace(r.ParentLease))
	}
	if msgs := validation.IsDNS1035Label(in.Service); len(msgs) > 0 {
		bad("service", "%q is not a valid service name (%s)", in.Service, msgs[0])
	}
	sts := in.StatefulSet
	if sts.Name != in.Service {
		bad("statefulSet.metadata.name", "%q differs from service %q: make them equal", sts.Name, in.Service)
	}
	if sts.Namespace != in.Namespace {
		bad("statefulSet.metadata.namespace", "%q differs from namespace %q: make them equal", sts.Namespace, in.Namespace)
	}
	if sts.Labels[manifest.LeaseLabel] != r.ParentLease || sts.Labels[manifest.ServiceLabel] != in.Service {
		bad("statefulSet.metadata.labels", "want %s=%s and %s=%s (as manifest.StatefulSet renders them)", manifest.LeaseLabel, r.ParentLease, manifest.ServiceLabel, in.Service)
	}
	if n := sts.Spec.Replicas; n == nil || *n < 0 || *n > manifest.MaxReplicas {
		bad("statefulSet.spec.replicas", "want 0 to %d", manifest.MaxReplicas)
	}
	if d := in.ProgressDeadlineSeconds; d < 0 || d > maxProgressDeadline {
		bad("progressDeadlineSeconds", "%d: want 0 (the default, %d) to %d", d, defaultProgressDeadline, maxProgressDeadline)
	}
	if n := in.MaxUnavailable; n < 0 || n > manifest.MaxReplicas {
		bad("maxUnavailable", "%d: want 0 (the default, 1) to %d", n, manifest.MaxReplicas)
	}
	if len(in.Steps) > maxSteps {
		bad("steps", "%d steps: at most %d", len(in.Steps), maxSteps)
	}
	for i, s := range in.Steps {
		if s.SetCanaryScale != nil {
			bad(fmt.Sprintf("steps[%d].setCanaryScale", i), "a stateful service's canary is its released ordinals (setWeight): it has no canary pods to scale apart")
		}
	}
	// As a manifest's steps (by the rules a lease's plan checked, within
	// its operator's limits: only a lease's workflow starts this one).
	if in.Background != nil && len(in.Steps) == 0 {
		bad("background", "a background analysis runs beside a canary's steps: give steps, or leave it out")
	}
	if err := manifest.ValidateRolloutAnalyses(in.Steps, in.Background, nil, 1, true); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// parentLease is the lease whose workflow started this run as its child
// ("" for a run started by hand).
func parentLease(ctx workflow.Context) string {
	if p := workflow.GetInfo(ctx).ParentWorkflowExecution; p != nil {
		if lease, _, ok := api.LeaseOfWorkflowID(p.ID); ok {
			return lease
		}
	}
	return ""
}

func (r *run) deadlineSeconds() int32 {
	if r.in.ProgressDeadlineSeconds > 0 {
		return r.in.ProgressDeadlineSeconds
	}
	return defaultProgressDeadline
}

func (r *run) maxUnavailable() int32 { return max(r.in.MaxUnavailable, 1) }

// carryOver is the input of the continued run.
func (r *run) carryOver() api.StatefulSetRolloutInput {
	in := r.in
	c := carry{Stable: r.Stable, StableHash: r.StableHash, StepIndex: r.StepIndex, Outcome: r.Outcome, Paused: r.Paused,
		ProgressAt: r.ProgressAt, Updated: r.Updated, Reverting: r.Reverting, PauseEnds: r.pauseEnds, ParentLease: r.ParentLease,
		Tally: r.Tally, Measured: r.Measured, Held: r.Held, Reason: r.Reason,
		Background: r.Background, BackgroundMeasured: r.BackgroundMeasured, BackgroundHeld: r.BackgroundHeld,
		Abort: r.abort, Promote: r.promote}
	in.Carry, _ = json.Marshal(c)
	return in
}
