package api

// Redeploy actions a schedule (or anyone) can ask a lease's workflow for.
const (
	// RedeployRestart rolls every pod of the lease onto a new revision of
	// the same manifest (kubectl rollout restart, for every service).
	RedeployRestart = "restart"
	// RedeployReapply deploys the lease's last-known-good manifest again,
	// repairing drift (a ReplicaSet scaled by hand, a deleted Service).
	RedeployReapply = "reapply"
)

// RedeployRequest is the "redeploy" signal's argument.
type RedeployRequest struct {
	Action  string `json:"action"`
	Trigger string `json:"trigger,omitempty"`
}

// ScheduledDeployInput is what a Temporal Schedule starts
// ScheduledDeployWorkflow with.
type ScheduledDeployInput struct {
	Lease  string `json:"lease"`
	Action string `json:"action"`
}
