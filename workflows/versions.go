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
	// versionFewerEvents: the deploy chain and the rollout's syncs call the
	// cluster in batched local activities (PrepareDeploy, ApplyDeploy,
	// FinishDeploy; PrepareRollout, ApplyPlan); search attributes are
	// upserted only when they change; a handled update is settled with a
	// timer only when it was accepted in the task that ends the run; a
	// closed lease's observation is taken during a deploy, whose wait for
	// its rollouts ticks on the safety net instead of every 30s. A run that
	// takes it takes every change above without asking (runs.takes), and
	// hands that on to its continued runs and rollouts in their input, so
	// they record no version marker of their own.
	versionFewerEvents = "fewer-events"
	// versionCanaryCounted: a canary's step counts no more available pods
	// on a side than its replicas (canary.Counted): a status stale after a
	// scale-down no longer lets the stable drop below maxUnavailable.
	versionCanaryCounted = "canary-counted"
	// versionRevertWithoutWaits: the rollouts that return a lease to its
	// last-known-good manifest after a failed deploy take no canary steps,
	// and a blue-green among them switches without waiting for promotion,
	// analyses or its scale-down delay (RolloutInput.Revert).
	versionRevertWithoutWaits = "revert-without-waits"
	// versionJoinSameManifest: a deploy request for the manifest being
	// deployed joins that deploy (deployRun.joins) instead of superseding
	// it and rolling the same manifest out again.
	versionJoinSameManifest = "join-same-manifest"
	// versionStrictInput: a workflow input typed by hand with an unknown
	// field or a value of the wrong type fails at once, typed
	// (InvalidInput, InvalidManifest), naming each field; runs that started
	// before it went on with what encoding/json made of it. A redeploy
	// signal with an unknown action is ignored (it reapplied).
	versionStrictInput = "strict-input"
	// versionJudgeWhereMeasured: an analysis's measurement is judged by
	// the activity that takes it (the conditions go in its input, the
	// phase comes back in its result), so workflow code never evaluates a
	// tenant's condition and the recorded verdict is what replays (issue
	// 20.1); runs before it judged in the workflow.
	versionJudgeWhereMeasured = "judge-where-measured"
	// versionGuardedInput: a hand-typed input the workflow itself would
	// never have written is refused (InvalidInput): a carry on a run that
	// does not continue one, a carried manifest that does not validate, a
	// trigger that is not a short printable word (issue 20.7). Asked only
	// when an input fails (input_guard.go): other runs record no marker.
	versionGuardedInput = "guarded-input"
	// versionContinueInGates: a canary's or blue-green's waits (pauses,
	// the preview awaiting promotion, the scale-down delay, a hold on an
	// inconclusive analysis) and analysis gates end once the run's history
	// is long, and the run continues as new with the step's state (its
	// start, tallies) carried; runs before it waited in one run until the
	// server's history limit (issue 20.8).
	versionContinueInGates = "continue-in-gates"
	// versionStrictAnalyses: a fresh start whose manifest passes only the
	// rules before issue 20 (any expr condition, any PromQL query, up to
	// 1 MiB) is refused; runs before it went on. Asked only then
	// (validateManifest); continued runs validate what they carry by the
	// older rules.
	versionStrictAnalyses = "strict-analyses"
	// versionUpgradeTest: only in the live upgrade test's build B
	// (upgradeTestBuild), which marks the deploys it finishes.
	versionUpgradeTest = "upgrade-test-build-b"
)

// gate reports whether this run takes change id (version 1): runs that
// started before it replay without it.
func gate(ctx workflow.Context, id string) bool {
	return workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1) == 1
}

// takesAll reports whether a run takes versionFewerEvents, and with it every
// change before it: inherited says its input was written by a run that did
// (no marker needed); otherwise the gate decides (and records a marker).
func takesAll(ctx workflow.Context, inherited bool) bool {
	return inherited || gate(ctx, versionFewerEvents)
}
