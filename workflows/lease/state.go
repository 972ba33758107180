package lease

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

const (
	defaultHealthInterval = 30 * time.Second
	defaultDegradedAfter  = 60 * time.Second
	maxHistoryRecords     = 20
)

// deployRun is one DeployWorkflow run's state; only the workflow goroutine
// and its handlers touch it.
type deployRun struct {
	ctx            workflow.Context
	in             deployInput
	key            string // the key of the deploy in progress (DeployRequest.Key)
	lease          string
	trigger        string
	healthInterval time.Duration
	degradedAfter  time.Duration

	// deployCarry is the state a run hands to the next (carryOver) and
	// starts from (newDeployRun): the lease's owner, phase, revision,
	// last-known-good and pending manifests, history, reservations, plan,
	// and the search attributes last upserted (Published).
	deployCarry

	current   *manifest.Manifest // being deployed, or last deployed
	requested *manifest.Manifest // the manifest of the deploy in progress, as it was asked for
	// taking is the plan of the deploy in progress: the hostnames it
	// reserves and the IP endpoints it allocates, the only ones an early
	// failure gives back.
	taking         *activities.DeployPlan
	approvedPlan   string // the fingerprint the deploy in progress was approved with
	unhealthySince time.Time
	unsettled      bool
	tree           *plan.Node            // the chain in progress's tree, as executed so far
	nodes          map[string]*plan.Node // the tree's node of each service's rollout
	approved       bool
	reverting      bool  // the chain runs for the last-known-good manifest after a failure
	lastFailure    error // why the last deploy failed, if it did
	teardowns      workflow.ReceiveChannel
	redeploys      workflow.ReceiveChannel
	leaseGone      bool                 // the lease is unknown or closed and nothing of it is deployed
	idle           bool                 // waiting for work: observations are taken only then
	observation    *observe.Observation // accepted, not yet acted on
	// behaviour: where this run's code differs from the current path
	// (legacy.go).
	flow.Behaviour
	// unsettledAt is the history length of the task that accepted the
	// update not yet settled.
	unsettledAt int
	// rollingOut: the deploy waits for its rollouts (a closed lease's
	// observation is taken then).
	rollingOut bool
	// deployStarted is when the deploy in progress started.
	deployStarted time.Time
	// rollbackTo is the deploy the deploy in progress returns to (a
	// rollback), or 0.
	rollbackTo int64
}

// deployID names one run of the deploy chain, for content-based change
// detection in ApplyObjects: a retried apply of the same run carries it.
func (w *deployRun) deployID() string {
	if w.reverting {
		return fmt.Sprintf("%d-revert", w.Revision)
	}
	return fmt.Sprint(w.Revision)
}

// base is the manifest operator changes start from: the last-known-good
// one, or the last deployed.
func (w *deployRun) base() *manifest.Manifest {
	if w.LastGood != nil {
		return w.LastGood
	}
	return w.current
}

func newDeployRun(ctx workflow.Context, in deployInput) *deployRun {
	w := &deployRun{
		ctx: ctx, in: in, lease: in.Manifest.Lease, trigger: in.Trigger,
		healthInterval: inputSeconds(in.HealthIntervalSeconds),
		degradedAfter:  inputSeconds(in.DegradedAfterSeconds),
	}
	if w.trigger == "" {
		w.trigger = "api"
	}
	if w.healthInterval <= 0 {
		w.healthInterval = defaultHealthInterval
	}
	if w.degradedAfter <= 0 {
		w.degradedAfter = defaultDegradedAfter
	}
	if c := in.Carry; c != nil {
		w.deployCarry = *c
		w.takeCarried()
		w.current = w.LastGood
	} else {
		m := in.Manifest
		w.Pending = &m // accepted once the run knows its behaviour
		w.PendingTrigger = w.trigger
		w.PendingKey = in.Key
	}
	return w
}

func (w *deployRun) carryOver() api.DeployInput {
	in := w.in
	if w.current != nil {
		in.Manifest = *w.current
	}
	carry := w.deployCarry
	carry.FewerEvents = w.Batches()
	carry.Hardened = w.TakesHardened
	in.Carry = &carry
	in.Key = "" // the start's; the carry has the keys
	return fitCarry(in).encode()
}

// deployInput is a lease workflow's input with its carry decoded: the
// carry is this workflow's own state, opaque bytes in the contract (api).
// Its JSON is api.DeployInput's (the carry shadows the raw one).
type deployInput struct {
	api.DeployInput
	Carry *deployCarry `json:"carry,omitempty"`
}

// decodeDeployInput decodes the carry of a lease workflow's input.
func decodeDeployInput(in api.DeployInput) (deployInput, error) {
	d := deployInput{DeployInput: in}
	d.DeployInput.Carry = nil
	return d, flow.DecodeCarry(in.Carry, &d.Carry)
}

// encode is in as the contract has it, its carry encoded.
func (in deployInput) encode() api.DeployInput {
	return flow.EncodeCarry(in.DeployInput, in.Carry, func(d *api.DeployInput, c json.RawMessage) { d.Carry = c })
}

func (w *deployRun) record(r api.DeployRecord) {
	w.History = append(w.History, r)
	if len(w.History) > maxHistoryRecords {
		w.History = w.History[len(w.History)-maxHistoryRecords:]
	}
}

// historyFull asks for continue-as-new while idle (health ticks add up).
func (w *deployRun) historyFull() bool {
	info := workflow.GetInfo(w.ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > flow.ContinueAsNewAfter
}

// settle records accepted updates in a task of their own before the run
// ends (see rolloutRun.settleControls).
func (w *deployRun) settle() {
	_ = workflow.Await(w.ctx, func() bool { return workflow.AllHandlersFinished(w.ctx) })
	if w.unsettled && w.Batches() && workflow.GetInfo(w.ctx).GetCurrentHistoryLength() > w.unsettledAt {
		w.unsettled = false // accepted in a task that has completed: recorded already
	}
	if w.unsettled {
		_ = workflow.Sleep(w.ctx, time.Millisecond)
		w.unsettled = false
	}
}

// unsettle notes an update handled in this workflow task.
func (w *deployRun) unsettle() {
	w.unsettled = true
	w.unsettledAt = workflow.GetInfo(w.ctx).GetCurrentHistoryLength()
}

// deployCarry is what a lease's workflow carries across continue-as-new.
type deployCarry struct {
	Owner    string             `json:"owner,omitempty"`
	Phase    string             `json:"phase"`
	LastGood *manifest.Manifest `json:"lastGood,omitempty"`
	Pending  *manifest.Manifest `json:"pending,omitempty"`
	// PendingTrigger is who asked for Pending.
	PendingTrigger string `json:"pendingTrigger,omitempty"`
	// PendingPlan is the plan fingerprint Pending was approved with.
	PendingPlan string `json:"pendingPlan,omitempty"`
	// PendingKey is the key Pending was sent with (DeployRequest.Key).
	PendingKey string             `json:"pendingKey,omitempty"`
	Revision   int64              `json:"revision"`
	History    []api.DeployRecord `json:"history,omitempty"`
	Teardown   bool               `json:"teardown,omitempty"`
	// What the status query shows of the last deploy.
	LastError string                `json:"lastError,omitempty"`
	Classes   map[string]string     `json:"classes,omitempty"`
	Hostnames []string              `json:"hostnames,omitempty"`
	Withheld  []activities.Withheld `json:"withheld,omitempty"`
	IPs       map[string]string     `json:"ips,omitempty"`
	// Objects are the lease's Services and Ingress after the last apply.
	Objects []string `json:"objects,omitempty"`
	// Plan is the last deploy's plan, as the status query shows it.
	Plan *activities.DeployPlan `json:"plan,omitempty"`
	// FewerEvents: the run took flow.VersionFewerEvents, and so does this one.
	FewerEvents bool `json:"fewerEvents,omitempty"`
	// Hardened: the run took flow.VersionHardenedPods, and so does this one.
	Hardened bool `json:"hardened,omitempty"`
	// Published is the search attributes the run ended with (they carry over).
	Published string `json:"published,omitempty"`
	// LastFailed is the manifest of the last deploy, if it failed (retry
	// deploys it again).
	LastFailed *manifest.Manifest `json:"lastFailed,omitempty"`
	// Rollback and reject (rollback.go): the manifests of the last
	// successful deploys, newest last; the deploys LastGood and
	// LastFailed are; the deploys rejected; and the deploy Pending returns
	// to, if it is a rollback.
	Deployed           []deployedManifest `json:"deployed,omitempty"`
	LastGoodRevision   int64              `json:"lastGoodRevision,omitempty"`
	LastFailedRevision int64              `json:"lastFailedRevision,omitempty"`
	Rejected           []int64            `json:"rejected,omitempty"`
	PendingRollbackTo  int64              `json:"pendingRollbackTo,omitempty"`
	// Refusals are the requests without an answer the lease refused (a
	// schedule's redeploy of a rejected deploy), newest last.
	Refusals []api.Refusal `json:"refusals,omitempty"`
}
