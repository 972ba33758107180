package flow

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
	VersionFewerEvents        = "fewer-events"
	VersionJudgeWhereMeasured = "judge-where-measured"
	VersionUpgradeTest        = "upgrade-test-build-b"
	VersionConfirmedClose     = "confirmed-close"
	VersionHardenedPods       = "hardened-pods"
	VersionReleaseWhatItTook  = "release-what-it-took"
	VersionDurableBeforeWrite = "durable-before-write"
)

// Retired are the changes whose gates went, with their old paths and the
// recordings only those needed (docs/upgrading.md, "When a gate may go,
// and how"): every run takes their current path without asking. Their IDs
// are never reused (TestARetiredChangeIDIsNeverReused).
var Retired = []string{
	// Retired with issue 36.4 (the first retirement), 2026-11-27.
	"rollout-workflow-id", "release-on-early-failure", "lease-follows-rollout", "end-unknown-lease",
	"drain-signals-before-continue-as-new", "lease-events", "canary-counted", "revert-without-waits",
	"join-same-manifest", "strict-input", "guarded-input", "continue-in-gates", "strict-analyses",
	"placement-limits", "placement-interrupts", "idempotent-keys", "own-workflow-id", "stable-at-deadline",
}

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

// Gates is every change, oldest first.
var Gates = []gateInfo{
	{VersionFewerEvents, "the deploy chain and the rollout's syncs call the cluster in batched local activities; search attributes are upserted only when they change; an update is settled with a timer only when accepted in the task that ends the run; a closed lease's observation is taken during a deploy, whose wait ticks on the safety net. A run that takes it takes every change above without asking, and hands that on in its input",
		[]string{"NewBehaviour"}, "20261124-1215-fewer-events", []string{"20261123-2302", "20261123-2339-rollout-continue-as-new", "20261124-0848"}, false},
	{VersionJudgeWhereMeasured, "an analysis's measurement is judged by the activity that takes it, so workflow code never evaluates a tenant's condition (issue 20.1); runs before it judged in the workflow",
		[]string{"judgesWhereMeasured"}, "20261125-0515-judge-where-measured", []string{"20261124-1215-fewer-events", "20261124-1535-plan-tree-bluegreen"}, false},
	{VersionUpgradeTest, "only in the live upgrade test's build B, which marks the deploys it finishes",
		[]string{"deployRun.marksUpgradeTest"}, "", nil, false},
	{VersionConfirmedClose, "an observation that the lease closed is a hint: the lease is torn down only once its record is read closed, or gone, from the API server; before, an observe update saying closed, typed by hand, tore an Active lease down (issue 35.2)",
		[]string{"deployRun.confirmsClose"}, "20261127-confirmed-close", []string{"20261124-0848", "20261124-1215-fewer-events", "20261124-1535-plan-tree-bluegreen", "20261125-0515-judge-where-measured", "20261125-0600-hostile-tenants", "20261126-quick-wait"}, false},
	{VersionHardenedPods, "a manifest sent to a lease (or planned) is taken with a security section in every service that has none, so its pods run hardened: the runtime's seccomp profile, no privilege escalation, every capability dropped (issue 35.4); before, it was taken as sent and its pods ran as the image said. A fresh run takes it with fewer-events (version 2 of that marker: no event of its own); a run continued from before it asks when it takes a manifest",
		[]string{"deployRun.accepted", "NewBehaviour", "plannedAs"}, "20261127-release-what-it-took", []string{"20261123-2302", "20261123-2339-rollout-continue-as-new", "20261124-0848"}, true},
	{VersionReleaseWhatItTook, "a deploy that fails before changing the workload gives back only the hostnames and IPs its plan took that the last-known-good manifest does not hold; before, every one the lease held beyond that manifest, though its workload might still serve them (a lease workflow started afresh) (issue 35.2); asked only then",
		[]string{"deployRun.releaseOnEarlyFailure"}, "20261127-release-what-it-took", []string{"20261123-2302", "20261124-0848", "20261124-1215-fewer-events", "20261124-1535-plan-tree-bluegreen", "20261125-0515-judge-where-measured", "20261125-0600-hostile-tenants", "20261126-quick-wait"}, false},
	{VersionDurableBeforeWrite, "what a workflow task decides from the cluster or the clock is recorded before the first write it leads to: an approved plan's second reading, and a restart's time, are followed by a 1 ms timer; before, a task that failed after the write ran again, read the cluster with that write in it (an approved plan then looked stale: aborted, with the objects written) or stamped a later time (a restart then rolled a second revision)",
		[]string{"deployRun.recordsApprovedPlan", "rolloutRun.recordsRestartTime"}, "20261128-durable-before-write", []string{"20261123-2302", "20261124-0848", "20261124-1215-fewer-events", "20261124-1535-plan-tree-bluegreen", "20261125-0515-judge-where-measured", "20261125-0600-hostile-tenants", "20261126-quick-wait", "20261127-release-what-it-took"}, false},
}

// Gate reports whether this run takes change id (version 1): runs that
// started before it replay without it. Only legacy.go asks.
func Gate(ctx workflow.Context, id string) bool {
	if r, ok := ctx.Value(ReplayGatesKey{}).(ReplayGates); ok {
		r.Asked(id)
		if r.NewPath[id] {
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
	if r, ok := ctx.Value(ReplayGatesKey{}).(ReplayGates); ok {
		r.Asked(id)
		r.Asked(next)
		switch {
		case r.NewPath[next]:
			return true, true
		case r.NewPath[id]:
			return true, false
		}
	}
	v := workflow.GetVersion(ctx, id, workflow.DefaultVersion, 2)
	return v >= 1, v >= 2
}

// ReplayGates is set only by a test's replayer (gates_test.go), in the
// context of the workflows it replays (under ReplayGatesKey): gate tells
// asked each change it is asked, and takes the new path of the changes in
// newPath without asking, so replaying a history that needs an old path
// fails. That is how the table's Needing is checked, and how one sees
// which recordings a retirement drops. (A context value, not a variable:
// the replays run beside workflows that must ask.)
type ReplayGates struct {
	NewPath map[string]bool
	Asked   func(id string)
}

type ReplayGatesKey struct{}
