package api

import (
	"encoding/json"
	"time"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
)

// DeployInput is DeployWorkflow's input: plain JSON, so it can be started
// from the Temporal UI or `temporal workflow start`.
type DeployInput struct {
	Manifest manifest.Manifest `json:"manifest"`
	// Trigger says who started it: cli, ui, schedule (default: api).
	Trigger string `json:"trigger,omitempty"`
	// HealthIntervalSeconds is the idle lease's safety-net timer: how often
	// it checks itself in case the worker's observer missed a change; zero
	// means an hour (30s for runs that predate lease-events).
	HealthIntervalSeconds int `json:"healthIntervalSeconds,omitempty"`
	// DegradedAfterSeconds: a lease below its replicas for this long is
	// Degraded; zero means 60.
	DegradedAfterSeconds int `json:"degradedAfterSeconds,omitempty"`
	// ApprovalTimeoutSeconds bounds the wait for a plan's approval
	// (manifests with requireApproval); zero means an hour.
	ApprovalTimeoutSeconds int `json:"approvalTimeoutSeconds,omitempty"`
	// Cluster is the cluster this workflow deploys the lease to, one of the
	// worker's --clusters; empty: the worker's own cluster. A lease's
	// workflow for cluster NAME is DeployWorkflowIDIn(lease, NAME) on task
	// queue <task queue>@NAME (ClusterTaskQueue), whose activities reach
	// that cluster only (issue 23.1).
	Cluster string `json:"cluster,omitempty"`
	// Key, if set, names the deploy of Manifest as DeployRequest.Key does
	// (a placement's Update-with-Start sends the same key in both, so
	// whichever reaches the run first is the one deploy).
	Key string `json:"key,omitempty"`
	// Carry is the state handed to a continued run, opaque to all but the
	// workflow that wrote it; leave it empty.
	Carry json.RawMessage `json:"carry,omitempty"`

	invalid error // what is wrong with an input typed by hand (UnmarshalJSON)
}

// Phases of a lease, as DeployStatus.Phase and the DeployflowPhase search
// attribute show them.
const (
	PhaseDeploying   = "Deploying"
	PhaseActive      = "Active"   // the last deploy is healthy
	PhaseDegraded    = "Degraded" // fewer replicas available than desired for too long
	PhaseUnknown     = "Unknown"  // the cluster could not be observed
	PhaseFailed      = "Failed"   // the last deploy failed (and was rolled back if it could be)
	PhaseTearingDown = "TearingDown"
	PhaseTornDown    = "TornDown"
	PhaseAborted     = "Aborted" // the first deploy was not approved; nothing was deployed
	// PhaseAwaitingApproval: a deploy's plan (requireApproval) waits for
	// the "approve" update; nothing has been written.
	PhaseAwaitingApproval = "AwaitingApproval"
)

// ApproveRequest is the "approve" update's argument. Fingerprint, if given,
// must be the plan awaiting approval (the one the approver has seen).
type ApproveRequest struct {
	Fingerprint string `json:"fingerprint,omitempty"`

	invalid error // a field unknown or of the wrong type (UnmarshalJSON)
}

// DeployRecord is one deploy of a lease, for `deployflow history`.
type DeployRecord struct {
	Revision int64                 `json:"revision"`
	Trigger  string                `json:"trigger"`
	Key      string                `json:"key,omitempty"` // the request's (DeployRequest.Key)
	Started  time.Time             `json:"started"`
	Finished time.Time             `json:"finished"`
	Outcome  string                `json:"outcome"`
	Image    map[string]string     `json:"images,omitempty"`
	Classes  map[string]string     `json:"classes,omitempty"`
	Withheld []activities.Withheld `json:"withheld,omitempty"`
	// Operations are what the deploy did, in the words of its plan.
	Operations []string `json:"operations,omitempty"`
	// Tree is the deploy's plan as executed: each operation's state.
	Tree *plan.Node `json:"tree,omitempty"`
	// Rollback is the return to the last-known-good manifest after a
	// failure, as executed.
	Rollback *plan.Node `json:"rollback,omitempty"`
	// RollbackTo is the deploy this one returned to (deployflow rollback).
	RollbackTo int64 `json:"rollbackTo,omitempty"`
	// Rejected: the lease's owner rejected this deploy (deployflow reject).
	Rejected bool `json:"rejected,omitempty"`
}

// DeployStatus is the "status" query's answer and DeployWorkflow's result.
type DeployStatus struct {
	Lease     string                `json:"lease"`
	Owner     string                `json:"owner,omitempty"`
	Namespace string                `json:"namespace"`
	Phase     string                `json:"phase"`
	Revision  int64                 `json:"revision"`
	Pending   bool                  `json:"pending"`
	LastError string                `json:"lastError,omitempty"`
	Services  []string              `json:"services,omitempty"`
	Classes   map[string]string     `json:"classes,omitempty"`
	Hostnames []string              `json:"hostnames,omitempty"`
	Withheld  []activities.Withheld `json:"withheld,omitempty"`
	IPs       map[string]string     `json:"ips,omitempty"`
	History   []DeployRecord        `json:"history,omitempty"`
	// Plan is the plan of the deploy in progress (awaiting approval, when
	// Phase is AwaitingApproval) or of the last one.
	Plan *activities.DeployPlan `json:"plan,omitempty"`
	// Tree is the tree of the deploy in progress, each operation's state
	// as it goes (or the last deploy's, as executed).
	Tree *plan.Node `json:"tree,omitempty"`
	// DeployingKey is the key of the deploy in progress or pending
	// (DeployRequest.Key), if it has one.
	DeployingKey string `json:"deployingKey,omitempty"`
	// LastGood is the last-known-good manifest: what a placement returns
	// this cluster to if a later wave fails.
	LastGood *manifest.Manifest `json:"lastGood,omitempty"`
	// RollbackTargets are the deploys a rollback may return to, oldest
	// first (the lease keeps the manifests of its last successful ones);
	// Rejected, the deploys the owner rejected.
	RollbackTargets []int64 `json:"rollbackTargets,omitempty"`
	Rejected        []int64 `json:"rejected,omitempty"`
	// Refusals are the requests without an answer (a schedule's redeploy
	// signal) the lease refused, newest last.
	Refusals []Refusal `json:"refusals,omitempty"`
}

// Refusal is a request without an answer a lease refused: when, who
// asked, why.
type Refusal struct {
	At      time.Time `json:"at"`
	Trigger string    `json:"trigger"`
	Error   string    `json:"error"`
}

// RollbackRequest is the "rollback" update's argument: To is the deploy
// (its revision) to return to, one of DeployStatus.RollbackTargets; 0 is
// the newest successful deploy before the one running that is not
// rejected.
type RollbackRequest struct {
	To int64 `json:"to,omitempty"`

	invalid error // a field unknown or of the wrong type (UnmarshalJSON)
}

// RejectRequest is the "reject" update's argument: the deploy (its
// revision) no retry, schedule, placement return or rollback deploys
// again.
type RejectRequest struct {
	Revision int64 `json:"revision"`

	invalid error // a field unknown or of the wrong type (UnmarshalJSON)
}

// ScaleServiceRequest is the "scale" update's argument.
type ScaleServiceRequest struct {
	Service  string `json:"service"`
	Replicas int32  `json:"replicas"`

	invalid error // a field unknown or of the wrong type (UnmarshalJSON)
}

// DeployRequest is the "deploy" update's argument.
type DeployRequest struct {
	Manifest manifest.Manifest `json:"manifest"`
	// PlanFingerprint, if set, is the plan the requester reviewed
	// (`deploy --plan --yes`): the deploy acts only if its own plan has this
	// fingerprint, and counts as approved (requireApproval); otherwise it is
	// aborted with nothing changed.
	PlanFingerprint string `json:"planFingerprint,omitempty"`
	// Trigger says who asked: cli, ui, schedule, api (the default).
	Trigger string `json:"trigger,omitempty"`
	// Key, if set, names this request (a placement's deploy to one
	// cluster): the deploy it starts is recorded with it (DeployRecord.Key)
	// and shown as DeployingKey while it runs, so the sender finds its
	// outcome after a retry or a continue-as-new instead of deploying
	// twice. A keyed request never joins a deploy in progress.
	Key string `json:"key,omitempty"`
	// IfLast, if set, deploys only if the lease's last deploy, or the one
	// in progress or pending, is the one with this key (a placement's
	// return to the last-known-good manifest); otherwise the update fails
	// with ErrNotLastDeploy and nothing changes. Checked here, as the
	// request lands, so a deploy sent meanwhile is never replaced.
	IfLast string `json:"ifLast,omitempty"`

	invalid  error // what is wrong with a request typed by hand (UnmarshalJSON)
	ofItsDay bool  // refused by today's rules only (PassesTheRulesOfItsDay)
}
