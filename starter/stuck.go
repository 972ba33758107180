package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// Why a workflow cannot answer: Temporal refuses a query ("Workflow Task
// in failed state") while the workflow's last task failed, until one
// succeeds. It says no more; the workflow's history does. A status that
// gives up on such a workflow says what its history recorded, so the
// operator reads the cause (a panic in the worker, a task timing out on
// an overloaded worker) without opening the Temporal UI.

// explainNotReady is err, with what the workflow's history recorded of
// its failing task when err is Temporal's refusal to query it.
func explainNotReady(ctx context.Context, c client.Client, workflowID string, err error) error {
	var notReady *serviceerror.WorkflowNotReady
	if !errors.As(err, &notReady) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	why := lastTaskFailure(ctx, c, workflowID)
	if why == "" {
		return err
	}
	return fmt.Errorf("%w: its workflow's task keeps failing: %s (the whole history: 'temporal workflow show -w %s')", err, why, workflowID)
}

// lastTaskFailure is the last workflow task failure or timeout the
// workflow's history recorded ("" if none or if it cannot be read): its
// cause and its message's first line.
func lastTaskFailure(ctx context.Context, c client.Client, workflowID string) string {
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var last *historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return ""
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			last = ev
		}
	}
	switch a := last.GetAttributes().(type) {
	case *historypb.HistoryEvent_WorkflowTaskFailedEventAttributes:
		msg, _, _ := strings.Cut(a.WorkflowTaskFailedEventAttributes.GetFailure().GetMessage(), "\n")
		if r := []rune(msg); len(r) > 300 {
			msg = string(r[:300]) + "…"
		}
		return fmt.Sprintf("event %d at %s: %s: %s", last.GetEventId(), last.GetEventTime().AsTime().UTC().Format(time.RFC3339),
			a.WorkflowTaskFailedEventAttributes.GetCause(), msg)
	case *historypb.HistoryEvent_WorkflowTaskTimedOutEventAttributes:
		return fmt.Sprintf("event %d at %s: the task timed out (%s): no worker of its task queue answered in time",
			last.GetEventId(), last.GetEventTime().AsTime().UTC().Format(time.RFC3339),
			a.WorkflowTaskTimedOutEventAttributes.GetTimeoutType())
	}
	return ""
}
