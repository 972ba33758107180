package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/deployflow/deployflow/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/mocks"
)

// Which of Temporal's errors the CLI waits out. A query of a lease whose
// run just continued as new can meet the new run before its first task
// (WorkflowNotReady): `status` waits instead of failing.
func TestTransientErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{serviceerror.NewUnavailable("down"), true},
		{serviceerror.NewResourceExhausted(0, "busy"), true},
		{serviceerror.NewDeadlineExceeded("slow"), true},
		{fmt.Errorf("query: %w", serviceerror.NewWorkflowNotReady("not ready")), true},
		{serviceerror.NewNotFound("workflow not found"), false},
		{serviceerror.NewInvalidArgument("bad"), false},
		{errors.New("plain"), false},
	} {
		assert.Equal(t, c.want, transient(c.err), "%T %v", c.err, c.err)
	}
}

// history read the deploy records once and, on any error, printed an
// empty history with exit 0: on a loaded server (CI, PostgreSQL) the
// query failed and `deployflow history` showed no deploy of a lease that
// had three. Now the records are asked as the status is: a transient
// error is waited out, any other is the command's error.
func TestHistoryWaitsForItsRecordsAndNeverPrintsAnEmptyHistoryInstead(t *testing.T) {
	var progress bytes.Buffer
	ctx := withRetrying(context.Background(), retrying{bound: time.Minute, progress: &progress})
	records := []api.DeployRecord{{Revision: 3, Trigger: "retry", Outcome: "Succeeded"}}
	answer := &mocks.Value{}
	answer.On("Get", mock.Anything).Run(func(args mock.Arguments) {
		*args.Get(0).(*api.DeployStatus) = api.DeployStatus{History: records}
	}).Return(nil)

	c := &mocks.Client{}
	c.On("QueryWorkflow", mock.Anything, api.DeployWorkflowID("l"), "", api.QueryStatus).
		Return(nil, serviceerror.NewDeadlineExceeded("context deadline exceeded")).Once()
	c.On("QueryWorkflow", mock.Anything, api.DeployWorkflowID("l"), "", api.QueryStatus).Return(answer, nil).Once()
	got, _, err := deployRecords(ctx, c, "l")
	require.NoError(t, err)
	assert.Equal(t, records, got)
	assert.Contains(t, progress.String(), "waiting for Temporal to answer the status of lease l")

	c = &mocks.Client{}
	c.On("QueryWorkflow", mock.Anything, api.DeployWorkflowID("l"), "", api.QueryStatus).
		Return(nil, serviceerror.NewInvalidArgument("unknown queryType"))
	_, _, err = deployRecords(ctx, c, "l")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read the deploy records: lease l: unknown queryType")
}
