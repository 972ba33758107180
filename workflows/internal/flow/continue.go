package flow

// ContinueAsNewAfter caps one run's history; the rollout then continues as
// a new run carrying its desired state and status.
const ContinueAsNewAfter = 4000
