package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// updatesClient answers UpdateWorkflow "Workflow Task in failed state"
// (WorkflowNotReady) until its last attempt, recording each attempt's
// update ID.
type updatesClient struct {
	client.Client
	refuse int
	ids    []string
}

func (c *updatesClient) UpdateWorkflow(_ context.Context, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	c.ids = append(c.ids, opts.UpdateID)
	if len(c.ids) <= c.refuse {
		return nil, serviceerror.NewWorkflowNotReady("Unable to perform workflow execution update due to Workflow Task in failed state.")
	}
	return nil, nil
}

// Guards the CLI's update retries: each attempt went under an ID of its
// own, so an attempt the server took while its caller saw an error was
// taken again by the next one (CI run 83: `deployflow retry`, answered
// "Workflow Task in failed state" three times, was refused at the fourth
// as "nothing to retry"). Every attempt now goes under one ID, which
// Temporal joins to the update it already holds.
func TestAnUpdateRetriedAfterATransientErrorKeepsItsID(t *testing.T) {
	c := &updatesClient{refuse: 2}
	var progress bytes.Buffer
	ctx := withRetrying(context.Background(), retrying{bound: time.Minute, progress: &progress})
	_, err := updateWorkflow(ctx, c, client.UpdateWorkflowOptions{WorkflowID: "deploy-a", UpdateName: "retry"})
	require.NoError(t, err)
	require.Len(t, c.ids, 3, "retried until taken")
	assert.NotEmpty(t, c.ids[0])
	assert.Equal(t, []string{c.ids[0], c.ids[0], c.ids[0]}, c.ids, "one update ID for every attempt")
	assert.Contains(t, progress.String(), "Workflow Task in failed state")

	c = &updatesClient{}
	_, err = updateWorkflow(ctx, c, client.UpdateWorkflowOptions{WorkflowID: "deploy-a", UpdateName: "retry", UpdateID: "mine"})
	require.NoError(t, err)
	assert.Equal(t, []string{"mine"}, c.ids, "an ID the caller chose is kept")
}
