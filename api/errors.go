package api

import (
	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// ErrPlacement is the failure type of a placement that did not complete.
const ErrPlacement = "PlacementFailed"

// ErrClusterDeploy is the failure type of a cluster's deploy that cannot
// complete (the lease's workflow there refused it, or another deploy
// superseded it).
const ErrClusterDeploy = "ClusterDeployFailed"

// Error types of DeployWorkflow's failures.
const (
	ErrLeaseNotActive   = activities.ErrLeaseNotActive
	ErrHostnameConflict = activities.ErrHostnameConflict
	ErrHostnameBlocked  = activities.ErrHostnameBlocked
	ErrIPPoolExhausted  = activities.ErrIPPoolExhausted
	ErrInvalidManifest  = activities.ErrInvalidManifest
)

// Error types of a rejected observation (a rejected update leaves no trace
// in the history).
const (
	// ErrObservationKnown: the observation changes nothing (another worker
	// sent it first, or this run predates observations). Do not resend.
	ErrObservationKnown = "ObservationKnown"
	// ErrObservationDeferred: a deploy is in progress (its rollouts watch
	// the services themselves): send again when its run ends. With an
	// ObserveResult whose RecheckAfter is set, the workflow is only between
	// two waits: send again after RecheckAfter.
	ErrObservationDeferred = "ObservationDeferred"
)

// ErrRolloutUndone: an operator undid a lease's rollout; the lease returns
// to its last-known-good manifest instead of recording the new one.
const ErrRolloutUndone = "RolloutUndone"

// Error types of RolloutWorkflow's non-retryable failures.
const (
	ErrInvalidInput             = activities.ErrInvalidInput
	ErrProgressDeadlineExceeded = rollout.TimedOutReason
	ErrRolloutAborted           = "RolloutAborted"
)

// ErrNotLastDeploy is the failure type of a deploy request whose IfLast is
// not the lease's last deploy: it was deployed again since.
const ErrNotLastDeploy = "NotLastDeploy"
