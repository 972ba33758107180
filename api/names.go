package api

// The names on the wire, as typed in the Temporal UI, `temporal workflow
// query|update execute|signal --name ...` or `deployflow`: one name per
// concept, whichever workflow takes it (L: a lease's DeployWorkflow, R: a
// rollout's RolloutWorkflow, P: a lease's PlacementWorkflow).
const (
	// QueryStatus is every workflow's state: L answers a DeployStatus, R a
	// RolloutStatus, P a PlacementStatus.
	QueryStatus = "status"

	// UpdateDeploy (L): a DeployRequest; starts or supersedes a deploy.
	UpdateDeploy = "deploy"
	// UpdateApprove (L): an ApproveRequest; approves the plan awaiting
	// approval.
	UpdateApprove = "approve"
	// UpdateRetry (L): deploy the last failed manifest again (an aborted
	// canary, a failed analysis).
	UpdateRetry = "retry"
	// UpdateRollback (L): a RollbackRequest; deploy a recorded successful
	// deploy's manifest again, its ReplicaSets scaled back up.
	UpdateRollback = "rollback"
	// UpdateReject (L): a RejectRequest; no retry, schedule, placement
	// return or rollback deploys that deploy again.
	UpdateReject = "reject"
	// UpdateTeardown (L): tear the lease's workload down and release its
	// reservations; SignalTeardown is the same, as a signal.
	UpdateTeardown = "teardown"
	SignalTeardown = "teardown"
	// SignalRedeploy (L): a RedeployRequest (a schedule's restart or
	// reapply).
	SignalRedeploy = "redeploy"
	// UpdateObserve (L): the observer's Observation; answer an
	// ObserveResult.
	UpdateObserve = "observe"

	// UpdateScale scales: L one service (a ScaleServiceRequest, a
	// scale-only deploy), R its rollout (a ScaleRequest).
	UpdateScale = "scale"
	// UpdateRestart restarts every pod: L every service, R its service.
	UpdateRestart = "restart"
	// UpdatePause and UpdateResume (R) pause and resume a rollout.
	UpdatePause  = "pause"
	UpdateResume = "resume"
	// UpdateUndo (R): an UndoRequest; back to an earlier revision.
	UpdateUndo = "undo"
	// UpdateAbort stops: R returns the stable revision; P returns every
	// cluster that moved.
	UpdateAbort = "abort"
	// UpdatePromote goes on: R a canary's or blue-green's PromoteRequest;
	// P past a wave held for approval or by an inconclusive analysis.
	UpdatePromote = "promote"
)
