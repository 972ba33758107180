// Package query gives a busy workflow's query the time it needs.
//
// A Temporal query is answered with the workflow's next workflow task when
// one is in flight (the server buffers it, so that the answer includes
// what the task records). A workflow that is always busy (a paused lease's
// health ticks, a canary's background analysis every second) always has a
// task in flight, and on a loaded server each task, with its local
// activities, can take 5 to 15 seconds (CI's PostgreSQL phase). The SDK's
// QueryWorkflow bounds each call to 10 seconds whatever the caller's
// context says (its maximum RPC timeout), so such a query failed with
// "context deadline exceeded" every time it was asked, for as long as the
// load lasted: `deployflow status` could not answer, and tests failed.
//
// Patient wraps a client so that QueryWorkflow calls the service directly
// with the caller's deadline, or Timeout when the caller has none.
package query

import (
	"context"
	"errors"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	querypb "go.temporal.io/api/query/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// Timeout is how long a query waits for its answer when the caller's
// context has no deadline: two slow workflow tasks and more.
const Timeout = time.Minute

// Patient returns c with a QueryWorkflow that waits up to the caller's
// deadline (or Timeout) for the workflow's answer. namespace and dc must
// be the ones c was dialled with (dc nil: the SDK's default), so that the
// answer decodes as c would decode it.
func Patient(c client.Client, namespace string, dc converter.DataConverter) client.Client {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	if namespace == "" {
		namespace = client.DefaultNamespace
	}
	return &patient{Client: c, namespace: namespace, dc: dc}
}

type patient struct {
	client.Client
	namespace string
	dc        converter.DataConverter
}

// QueryWorkflow asks workflowID's run (the current one when runID is
// empty) queryType with args.
func (p *patient) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, Timeout)
		defer cancel()
	}
	in, err := p.dc.ToPayloads(args...)
	if err != nil {
		return nil, err
	}
	resp, err := p.WorkflowService().QueryWorkflow(ctx, &workflowservice.QueryWorkflowRequest{
		Namespace: p.namespace,
		Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID},
		Query:     &querypb.WorkflowQuery{QueryType: queryType, QueryArgs: in},
	})
	if err != nil {
		return nil, err
	}
	if r := resp.GetQueryRejected(); r != nil {
		return nil, errors.New("query rejected: the workflow is " + r.GetStatus().String())
	}
	return &answer{payloads: resp.GetQueryResult(), dc: p.dc}, nil
}

// answer is a query's result, decoded on Get as the client would.
type answer struct {
	payloads *commonpb.Payloads
	dc       converter.DataConverter
}

func (a *answer) HasValue() bool { return a.payloads != nil && len(a.payloads.GetPayloads()) > 0 }

func (a *answer) Get(valuePtr any) error {
	if !a.HasValue() {
		return errors.New("the query returned no value")
	}
	return a.dc.FromPayloads(a.payloads, valuePtr)
}
