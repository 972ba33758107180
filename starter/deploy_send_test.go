package main

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// deployClient answers Update-with-Start: the first `timeouts` attempts'
// waits end as the SDK's long poll does when no worker took the update in
// time, the next one with answer; it records each attempt's update ID.
type deployClient struct {
	client.Client
	timeouts int
	answer   error
	ids      []string
}

type startedOp struct{}

func (startedOp) Get(context.Context) (client.WorkflowRun, error) { return nil, nil }

func (c *deployClient) NewWithStartWorkflowOperation(client.StartWorkflowOptions, any, ...any) client.WithStartWorkflowOperation {
	return startedOp{}
}

func (c *deployClient) UpdateWithStartWorkflow(_ context.Context, opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	c.ids = append(c.ids, opts.UpdateOptions.UpdateID)
	if len(c.ids) <= c.timeouts {
		return deployHandle{client.NewWorkflowUpdateServiceTimeoutOrCanceledError(context.DeadlineExceeded)}, nil
	}
	return deployHandle{c.answer}, nil
}

type deployHandle struct{ err error }

func (h deployHandle) WorkflowID() string { return "deploy-l" }
func (h deployHandle) RunID() string      { return "" }
func (h deployHandle) UpdateID() string   { return "" }
func (h deployHandle) Get(_ context.Context, v any) error {
	if h.err == nil {
		*v.(*api.DeployStatus) = api.DeployStatus{Revision: 2}
	}
	return h.err
}

// Guards `deployflow deploy` on a loaded server: the SDK's wait for the
// deploy's update ended before a worker took it ("Timeout or cancellation
// waiting for update", as the soak's deploys did in CI runs 87 and 88) and
// the CLI failed a deploy the server still held. It now sends it again
// under the same update ID, which the server joins to the one it holds;
// the workflow's own refusal is the command's answer, never retried.
func TestADeployWhoseUpdateWaitTimesOutIsSentAgainUnderItsID(t *testing.T) {
	var progress bytes.Buffer
	ctx := withRetrying(context.Background(), retrying{bound: time.Minute, progress: &progress})
	m := &manifest.Manifest{Lease: "l"}

	c := &deployClient{timeouts: 2}
	_, accepted, err := sendDeploy(ctx, c, "tq", m, "")
	require.NoError(t, err)
	assert.Equal(t, int64(2), accepted.Revision, "the deploy's answer")
	require.Len(t, c.ids, 3, "sent until its wait ended in an answer")
	assert.NotEmpty(t, c.ids[0])
	assert.Equal(t, []string{c.ids[0], c.ids[0], c.ids[0]}, c.ids, "one update ID for every attempt")
	assert.Contains(t, progress.String(), "waiting for Temporal to deploy lease l")

	refusal := temporal.NewApplicationError("manifest refused", api.ErrInvalidManifest)
	c = &deployClient{answer: refusal}
	_, _, err = sendDeploy(ctx, c, "tq", m, "")
	require.Error(t, err)
	assert.True(t, errors.Is(err, refusal) || errors.As(err, new(*temporal.ApplicationError)), "%v", err)
	assert.Contains(t, err.Error(), "lease l refused the manifest")
	assert.Len(t, c.ids, 1, "a refusal is not sent again")
}
