package workflows

import "go.temporal.io/sdk/workflow"

// Change IDs of workflow.GetVersion gates. A running workflow replays the
// branch it first took; new runs take the newest. Each ID names one change
// of what a running workflow does; never reuse or rename one.
const (
	// versionRolloutID: rollout children get IDs joined by IDSeparator
	// (version 1) instead of '-' (DefaultVersion), which two leases could
	// share.
	versionRolloutID = "rollout-workflow-id"
	// versionReleaseOnEarlyFailure: a deploy that fails before changing the
	// workload releases the hostnames and IPs it took that the last-known-good
	// manifest does not hold.
	versionReleaseOnEarlyFailure = "release-on-early-failure"
	// versionLeaseFollowsRollout: the lease records what its rollouts ended
	// on (an operator's scale or restart of the rollout; an undo returns the
	// lease to its last-known-good manifest) instead of the manifest sent.
	versionLeaseFollowsRollout = "lease-follows-rollout"
	// versionEndUnknownLease: a lease workflow whose lease is unknown or
	// closed, with nothing deployed, ends (LeaseNotActive) instead of idling.
	versionEndUnknownLease = "end-unknown-lease"
	// versionDrainSignals: signals that arrive in the workflow task that
	// continues as new are drained and carried over, not dropped.
	versionDrainSignals = "drain-signals-before-continue-as-new"
	// versionLeaseEvents: an idle lease takes the worker observer's
	// "observe" updates and checks itself on one slow safety-net timer (an
	// hour unless healthIntervalSeconds is set) reading a single
	// observation, instead of a lease check and a health check every 30s;
	// health compares available replicas with the manifest's, not with
	// spec.replicas (a ReplicaSet scaled down by hand is unhealthy).
	versionLeaseEvents = "lease-events"
	// versionUpgradeTest: only in the live upgrade test's build B
	// (upgradeTestBuild), which marks the deploys it finishes.
	versionUpgradeTest = "upgrade-test-build-b"
)

// gate reports whether this run takes change id (version 1): runs that
// started before it replay without it.
func gate(ctx workflow.Context, id string) bool {
	return workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1) == 1
}
