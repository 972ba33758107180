package flow

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/workflow"
)

// Review of issue 20.7: a cron run (and a retry) names the run before it,
// as a continued run does, but starts from the input typed by hand: a
// carry refused in the first run was taken in the second.
func TestOnlyAContinueAsNewIsAContinuedRun(t *testing.T) {
	assert.True(t, continuedRun(&workflow.Info{ContinuedExecutionRunID: "r1", Attempt: 1}))
	assert.False(t, continuedRun(&workflow.Info{Attempt: 1}), "a fresh start")
	assert.False(t, continuedRun(&workflow.Info{ContinuedExecutionRunID: "r1", CronSchedule: "* * * * *", Attempt: 1}), "a cron run")
	assert.False(t, continuedRun(&workflow.Info{ContinuedExecutionRunID: "r1", Attempt: 2}), "a retry")
}
