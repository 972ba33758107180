package flow

import (
	"github.com/deployflow/deployflow/api"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// RefuseGuarded ends a run whose input fails its guard.
func RefuseGuarded(problem error) error {
	if problem == nil {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(problem.Error(), api.ErrInvalidInput, nil)
}

// Continued reports whether this run continues an earlier one of the same
// workflow by its own continue-as-new: not a cron run nor a retry, which
// also name the run before them but start from the input typed by hand
// (a carry refused in the first run must not be taken in the second).
func Continued(ctx workflow.Context) bool { return continuedRun(workflow.GetInfo(ctx)) }

func continuedRun(info *workflow.Info) bool {
	return info.ContinuedExecutionRunID != "" && info.CronSchedule == "" && info.Attempt <= 1
}

// ReplayerWorkflowID is the ID the SDK's replayer runs a recorded history
// under: let through only while replaying (a run started under that ID
// meets the check in its first, live, workflow task and is refused).
const ReplayerWorkflowID = "ReplayId"
