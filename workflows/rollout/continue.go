package rollout

import (
	"encoding/json"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/workflows/internal/flow"
	"go.temporal.io/sdk/workflow"
)

// A rollout's hand-over to its next run: when the history is long (in its
// syncs, and inside its gates and waits: issue 20.8), and what it carries.

// minHistoryEvents is the smallest MaxHistoryEvents a rollout accepts: a
// run must get through its first syncs.
const minHistoryEvents = 20

func (r *rolloutRun) shouldContinueAsNew() bool {
	limit := flow.ContinueAsNewAfter
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

func (r *rolloutRun) carryOver() api.RolloutInput {
	in := r.in
	in.FewerEvents = r.Batches()
	in.Carry = &rolloutCarry{Deployment: *r.d.DeepCopy(), StableRevision: r.stableRevision, Outcome: r.outcome, UndoneTo: r.undoneTo, Canary: r.canary, BlueGreen: r.blueGreen,
		ParentLease: r.parentLease()}
	return in.encode()
}

// rolloutInput is a rollout's input with its carry decoded: the carry is
// this workflow's own state, opaque bytes in the contract (api). Its JSON
// is api.RolloutInput's (the carry shadows the raw one).
type rolloutInput struct {
	api.RolloutInput
	Carry *rolloutCarry `json:"carry,omitempty"`
}

// decodeRolloutInput decodes the carry of a rollout's input.
func decodeRolloutInput(in api.RolloutInput) (rolloutInput, error) {
	r := rolloutInput{RolloutInput: in}
	r.RolloutInput.Carry = nil
	return r, flow.DecodeCarry(in.Carry, &r.Carry)
}

// encode is in as the contract has it, its carry encoded.
func (in rolloutInput) encode() api.RolloutInput {
	return flow.EncodeCarry(in.RolloutInput, in.Carry, func(r *api.RolloutInput, c json.RawMessage) { r.Carry = c })
}
