package app

import (
	"context"
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/workflows"
)

// TemporalSender sends observations as the lease workflow's "observe"
// update.
type TemporalSender struct{ Client client.Client }

// Send implements Sender.
func (s TemporalSender) Send(ctx context.Context, o *observe.Observation) (*observe.ObserveResult, error) {
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.DeployWorkflowID(o.Lease),
		UpdateName:   workflows.UpdateObserve,
		Args:         []any{o},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var res observe.ObserveResult
	if err == nil {
		err = h.Get(ctx, &res)
	}
	var notFound *serviceerror.NotFound
	var appErr *temporal.ApplicationError
	switch {
	case err == nil:
		return &res, nil
	case errors.As(err, &notFound):
		return nil, observe.ErrNoWorkflow
	case errors.As(err, &appErr) && appErr.Type() == workflows.ErrObservationKnown:
		_ = appErr.Details(&res) // a recheck time, if the lease is below its replicas
		return &res, observe.ErrKnown
	case errors.As(err, &appErr) && appErr.Type() == workflows.ErrObservationDeferred:
		return nil, observe.ErrDeferred
	}
	return nil, err
}
