package app

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/observe"
)

// TemporalSender sends observations as the lease workflow's "observe"
// update: the workflow of the lease's deploys to Cluster ("" the worker's
// own).
type TemporalSender struct {
	Client  client.Client
	Cluster string
}

// Send implements Sender.
func (s TemporalSender) Send(ctx context.Context, o *observe.Observation, updateID string) (*observe.ObserveResult, error) {
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     updateID,
		WorkflowID:   api.DeployWorkflowIDIn(o.Lease, s.Cluster),
		UpdateName:   api.UpdateObserve,
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
	case errors.As(err, &appErr) && appErr.Type() == api.ErrObservationKnown:
		_ = appErr.Details(&res) // a recheck time, if the lease is below its replicas
		return &res, observe.ErrKnown
	case errors.As(err, &appErr) && appErr.Type() == api.ErrObservationDeferred:
		d := &observe.DeferredError{}
		if appErr.Details(&res) == nil && res.RecheckAfter > 0 {
			d.RetryAfter = res.RecheckAfter // busy, not deploying
		} else if h != nil {
			d.Run = h.RunID() // the run deploying
		}
		return nil, d
	case errors.As(err, &appErr):
		// Answered, with another refusal: sending it again would not
		// change the answer (and would hold the lease's one update).
		return nil, fmt.Errorf("%w: %w", observe.ErrRejected, err)
	}
	return nil, err
}

// AwaitRunEnd implements observe.RunWaiter: a long poll of the run's close
// event (a lease workflow's deploy ends its run: it continues as new).
func (s TemporalSender) AwaitRunEnd(ctx context.Context, lease, run string) error {
	it := s.Client.GetWorkflowHistory(ctx, api.DeployWorkflowIDIn(lease, s.Cluster), run, true, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			return err
		}
	}
	return nil
}
