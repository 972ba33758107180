package workflows

// continueAsNewAfter caps one run's history; the rollout then continues as
// a new run carrying its desired state and status.
const continueAsNewAfter = 4000
