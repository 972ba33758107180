package workflows

import "go.temporal.io/sdk/workflow"

// Version gates. Each change of what a running workflow does has an ID,
// asked with workflow.GetVersion where the old and new paths part: a
// running workflow replays the branch it first took, new runs take the new
// one. Every such place is a method of legacy.go; the table below says
// what each change did, which methods ask it and which recorded histories
// still need its old path. docs/upgrading.md ("Changing workflow code")
// prints the table (TestTheGateTableIsTheDocs keeps the two equal) and says
// when a gate may go. Never reuse or rename an ID.
const (
	versionRolloutID             = "rollout-workflow-id"
	versionReleaseOnEarlyFailure = "release-on-early-failure"
	versionLeaseFollowsRollout   = "lease-follows-rollout"
	versionEndUnknownLease       = "end-unknown-lease"
	versionDrainSignals          = "drain-signals-before-continue-as-new"
	versionLeaseEvents           = "lease-events"
	versionFewerEvents           = "fewer-events"
	versionCanaryCounted         = "canary-counted"
	versionRevertWithoutWaits    = "revert-without-waits"
	versionJoinSameManifest      = "join-same-manifest"
	versionStrictInput           = "strict-input"
	versionJudgeWhereMeasured    = "judge-where-measured"
	versionGuardedInput          = "guarded-input"
	versionContinueInGates       = "continue-in-gates"
	versionStrictAnalyses        = "strict-analyses"
	versionUpgradeTest           = "upgrade-test-build-b"
	versionPlacementLimits       = "placement-limits"
	versionPlacementInterrupts   = "placement-interrupts"
	versionIdempotentKeys        = "idempotent-keys"
	versionOwnWorkflowID         = "own-workflow-id"
	versionConfirmedClose        = "confirmed-close"
	versionStableAtDeadline      = "stable-at-deadline"
	versionHardenedPods          = "hardened-pods"
	versionReleaseWhatItTook     = "release-what-it-took"
)

// gateInfo is one change of what a running workflow does.
type gateInfo struct {
	ID string
	// Changed is what the change did; runs that started before it do the
	// old thing.
	Changed string
	// Guards are the methods of legacy.go that ask the gate: where the
	// paths part.
	Guards []string
	// Since is the first set of recorded histories (testdata/histories/)
	// made by code with the change ("" for a gate only tests take).
	Since string
	// Needing are the sets with a recording that replays only on the old
	// path: with the gate forced to its new path, they fail (a retirement
	// drops them; TestTheGateTableNamesTheRecordingsEachGateNeeds keeps
	// this exact).
	Needing []string
	// Carried: a run that started before the change hands the old path on
	// to the runs it continues as (in its carried state), so the gate can
	// go only once no such chain runs, however recent its latest run.
	Carried bool
}

// gates is every change, oldest first.
var gates = []gateInfo{
	{versionRolloutID, "rollout children get IDs joined by IDSeparator instead of '-', which two leases could share",
		[]string{"deployRun.rolloutWorkflowID"}, "20261123-2302", []string{"e104f28-before-isolation"}, false},
	{versionReleaseOnEarlyFailure, "a deploy that fails before changing the workload releases the hostnames and IPs it took that the last-known-good manifest does not hold",
		[]string{"deployRun.releasesOnEarlyFailure"}, "20261123-2302", nil, false},
	{versionLeaseFollowsRollout, "the lease records what its rollouts ended on (an operator's scale or restart; an undo returns it to its last-known-good manifest) instead of the manifest sent",
		[]string{"deployRun.followsRollouts"}, "20261123-2302", nil, false},
	{versionEndUnknownLease, "a lease workflow whose lease is unknown or closed, with nothing deployed, ends (LeaseNotActive) instead of idling",
		[]string{"deployRun.endsUnknownLease"}, "20261123-2302", nil, false},
	{versionDrainSignals, "signals that arrive in the workflow task that continues as new are drained and carried over, not dropped",
		[]string{"deployRun.drainsSignals"}, "20261123-2302", nil, false},
	{versionLeaseEvents, "an idle lease takes the observer's \"observe\" updates and checks itself on one slow safety-net timer reading one observation, instead of a lease check and a health check every 30s; health compares available replicas with the manifest's",
		[]string{"deployRun.askLeaseEvents"}, "20261124-0848", nil, false},
	{versionFewerEvents, "the deploy chain and the rollout's syncs call the cluster in batched local activities; search attributes are upserted only when they change; an update is settled with a timer only when accepted in the task that ends the run; a closed lease's observation is taken during a deploy, whose wait ticks on the safety net. A run that takes it takes every change above without asking, and hands that on in its input",
		[]string{"newBehaviour"}, "20261124-1215-fewer-events", []string{"20261123-2302", "20261123-2339-rollout-continue-as-new", "20261124-0848", "e104f28-before-isolation"}, false},
	{versionCanaryCounted, "a canary's step counts no more available pods on a side than its replicas: a status stale after a scale-down no longer lets the stable drop below maxUnavailable",
		[]string{"countsCanarySides"}, "20261124-1825-strict-input", nil, true},
	{versionRevertWithoutWaits, "the rollouts that return a lease to its last-known-good manifest take no canary steps, and a blue-green among them switches without waiting for promotion, analyses or its scale-down delay",
		[]string{"deployRun.revertsWithoutWaits"}, "20261124-1825-strict-input", nil, false},
	{versionJoinSameManifest, "a deploy request for the manifest being deployed joins that deploy instead of superseding it and rolling the same manifest out again",
		[]string{"deployRun.joinsSameManifest"}, "20261124-1840-join-same-manifest", nil, false},
	{versionStrictInput, "an input typed by hand with an unknown field or a value of the wrong type fails at once, typed, naming each field; a redeploy signal with an unknown action is ignored (it reapplied)",
		[]string{"refusesMalformedInput"}, "20261124-1825-strict-input", nil, false},
	{versionJudgeWhereMeasured, "an analysis's measurement is judged by the activity that takes it, so workflow code never evaluates a tenant's condition (issue 20.1); runs before it judged in the workflow",
		[]string{"judgesWhereMeasured"}, "20261125-0515-judge-where-measured", []string{"20261124-1215-fewer-events", "20261124-1535-plan-tree-bluegreen"}, false},
	{versionGuardedInput, "a hand-typed input the workflow itself would never have written is refused: a carry on a run that does not continue one, a carried manifest that does not validate, a trigger that is not a short printable word (issue 20.7); asked only when an input fails",
		[]string{"refusesGuarded"}, "20261125-0600-hostile-tenants", nil, false},
	{versionContinueInGates, "a canary's or blue-green's waits and analysis gates end once the run's history is long, and the run continues as new with the step's state carried (issue 20.8)",
		[]string{"continuesInGates"}, "20261125-0600-hostile-tenants", nil, false},
	{versionStrictAnalyses, "a fresh start whose manifest passes only the rules before issue 20 is refused; asked only then",
		[]string{"refusesLenientManifest"}, "20261125-0600-hostile-tenants", nil, false},
	{versionUpgradeTest, "only in the live upgrade test's build B, which marks the deploys it finishes",
		[]string{"deployRun.marksUpgradeTest"}, "", nil, false},
	{versionPlacementLimits, "a placement records its manifest's validation (a later build's rules never fail it on replay) and checks its waves' analyses against the operator's limits (--min-analysis-interval, --max-analysis-count) before it deploys anything",
		[]string{"checksPlacementLimits"}, "20261126-placement-limits", []string{"20261126-placement"}, false},
	{versionPlacementInterrupts, "an abort, or a failed cluster, interrupts the wave's deploys in flight and returns those clusters too, instead of waiting for them to end; a placement runs only as placement-<lease>",
		[]string{"interruptsWaves"}, "20261126-placement-interrupts", nil, false},
	{versionIdempotentKeys, "a deploy request whose key is the deploy's in progress, pending or recorded changes nothing (it superseded that deploy with the same manifest); asked only then",
		[]string{"deployRun.ignoresRepeatedKey"}, "20261126-idempotent-keys", nil, false},
	{versionOwnWorkflowID, "a lease's workflow runs only under its lease's ID (deploy-<lease>, or deploy-<lease>@<cluster>): under another it acted for that lease beside the lease's own, and one failing early released hostnames and IPs the lease still used (issue 35.2); asked only then",
		[]string{"refusesForeignWorkflowID"}, "20261127-own-workflow-id", nil, false},
	{versionConfirmedClose, "an observation that the lease closed is a hint: the lease is torn down only once its record is read closed, or gone, from the API server; before, an observe update saying closed, typed by hand, tore an Active lease down (issue 35.2)",
		[]string{"deployRun.confirmsClose"}, "20261127-confirmed-close", []string{"20261124-0848", "20261124-1215-fewer-events", "20261124-1535-plan-tree-bluegreen", "20261125-0515-judge-where-measured", "20261125-0600-hostile-tenants", "20261126-quick-wait"}, false},
	{versionStableAtDeadline, "autoRollback at the progress deadline, where the rollout's start read no fully available revision (a ReplicaSet's status behind its pods), looks again and rolls back to the newest one fully available now; before, the rollout failed with the broken revision half rolled out; asked only then",
		[]string{"rolloutRun.rereadsStableAtDeadline"}, "20261127-stable-at-deadline", nil, false},
	{versionHardenedPods, "a manifest sent to a lease (or planned) is taken with a security section in every service that has none, so its pods run hardened: the runtime's seccomp profile, no privilege escalation, every capability dropped (issue 35.4); before, it was taken as sent and its pods ran as the image said. A fresh run takes it with fewer-events (version 2 of that marker: no event of its own); a run continued from before it asks when it takes a manifest",
		[]string{"deployRun.accepted", "newBehaviour", "plannedAs"}, "20261127-release-what-it-took", []string{"20261123-2302", "20261123-2339-rollout-continue-as-new", "20261124-0848", "e104f28-before-isolation"}, true},
	{versionReleaseWhatItTook, "a deploy that fails before changing the workload gives back only the hostnames and IPs its plan took that the last-known-good manifest does not hold; before, every one the lease held beyond that manifest, though its workload might still serve them (a lease workflow started afresh) (issue 35.2); asked only then",
		[]string{"deployRun.releaseOnEarlyFailure"}, "20261127-release-what-it-took", []string{"20261123-2302", "20261124-0848", "20261124-1215-fewer-events", "20261124-1535-plan-tree-bluegreen", "20261125-0515-judge-where-measured", "20261125-0600-hostile-tenants", "20261126-quick-wait"}, false},
}

// gate reports whether this run takes change id (version 1): runs that
// started before it replay without it. Only legacy.go asks.
func gate(ctx workflow.Context, id string) bool {
	if r, ok := ctx.Value(replayGatesKey{}).(replayGates); ok {
		r.asked(id)
		if r.newPath[id] {
			return true
		}
	}
	return workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1) == 1
}

// gateThen is gate for change id and the change next that extends it
// (version 2 of id's marker): a run that asks id when next exists takes
// both, with no marker of its own for next. Runs that took id before
// next existed replay version 1: id's path, not next's. Only legacy.go
// asks.
func gateThen(ctx workflow.Context, id, next string) (takesID, takesNext bool) {
	if r, ok := ctx.Value(replayGatesKey{}).(replayGates); ok {
		r.asked(id)
		r.asked(next)
		switch {
		case r.newPath[next]:
			return true, true
		case r.newPath[id]:
			return true, false
		}
	}
	v := workflow.GetVersion(ctx, id, workflow.DefaultVersion, 2)
	return v >= 1, v >= 2
}

// replayGates is set only by a test's replayer (gates_test.go), in the
// context of the workflows it replays (under replayGatesKey): gate tells
// asked each change it is asked, and takes the new path of the changes in
// newPath without asking, so replaying a history that needs an old path
// fails. That is how the table's Needing is checked, and how one sees
// which recordings a retirement drops. (A context value, not a variable:
// the replays run beside workflows that must ask.)
type replayGates struct {
	newPath map[string]bool
	asked   func(id string)
}

type replayGatesKey struct{}
