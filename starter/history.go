package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/deployflow/deployflow/api"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// runHistory is `deployflow history <lease>`: every deploy of the lease
// (who or what triggered it, when, outcome, duration) from the deploy
// records its workflow keeps, and the workflow runs behind them from Temporal
// visibility.
func runHistory(g *globals, fs *flag.FlagSet) runner {
	return func(ctx context.Context, pos []string, stdout io.Writer) error {
		if len(pos) != 1 {
			return usageError{errors.New("usage: deployflow history <lease>")}
		}
		lease := pos[0]
		c, err := g.temporal(ctx)
		if err != nil {
			return err
		}
		defer c.Close()

		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`WorkflowId = %q`, api.DeployWorkflowID(lease)),
		})
		if err != nil {
			return fmt.Errorf("list runs of lease %s: %w", lease, err)
		}
		runs := resp.GetExecutions()
		placements := placementHistory(ctx, c, lease)
		if len(runs) == 0 && len(placements) == 0 {
			return fmt.Errorf("lease %s has never been deployed ('deployflow deploy -f manifest.yaml')", lease)
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].GetStartTime().AsTime().Before(runs[j].GetStartTime().AsTime()) })

		var records []api.DeployRecord
		var refusals []api.Refusal
		if len(runs) > 0 {
			if records, refusals, err = deployRecords(ctx, c, lease); err != nil {
				return err
			}
		}
		if g.output == "json" {
			type run struct {
				RunID  string    `json:"runId"`
				Status string    `json:"status"`
				Start  time.Time `json:"start"`
				Close  time.Time `json:"close,omitempty"`
			}
			out := struct {
				Deploys    []api.DeployRecord    `json:"deploys"`
				Refusals   []api.Refusal         `json:"refusals,omitempty"`
				Runs       []run                 `json:"runs"`
				Placements []api.PlacementStatus `json:"placements,omitempty"`
			}{Deploys: records, Refusals: refusals, Placements: placements}
			for _, r := range runs {
				out.Runs = append(out.Runs, run{RunID: r.GetExecution().GetRunId(), Status: r.GetStatus().String(),
					Start: r.GetStartTime().AsTime(), Close: r.GetCloseTime().AsTime()})
			}
			return json.NewEncoder(stdout).Encode(out)
		}

		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DEPLOY\tTRIGGER\tSTARTED\tDURATION\tIMAGES\tOUTCOME")
		for _, r := range records {
			var imgs []string
			for svc, img := range r.Image {
				imgs = append(imgs, svc+"="+img)
			}
			sort.Strings(imgs)
			deploy, outcome := fmt.Sprintf("#%d", r.Revision), r.Outcome
			if r.RollbackTo != 0 {
				outcome = fmt.Sprintf("rollback to #%d: %s", r.RollbackTo, outcome)
			}
			if r.Rejected {
				deploy += " (rejected)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", deploy, r.Trigger, r.Started.UTC().Format(time.RFC3339),
				r.Finished.Sub(r.Started).Round(100*time.Millisecond), strings.Join(imgs, " "), outcome)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, r := range refusals {
			fmt.Fprintf(stdout, "refused %s (%s): %s\n", r.At.UTC().Format(time.RFC3339), r.Trigger, r.Error)
		}
		// What each deploy executed: its plan's tree, each operation's state.
		for _, r := range records {
			if r.Tree == nil {
				continue // recorded before deploys kept their tree
			}
			rejected := ""
			if r.Rejected {
				rejected = " (rejected: no retry, schedule, placement return or rollback deploys it again)"
			}
			fmt.Fprintf(stdout, "\ndeploy #%d, as executed%s:\n", r.Revision, rejected)
			r.Tree.Format(stdout, true)
			if r.Rollback != nil {
				fmt.Fprintf(stdout, "deploy #%d, the return to the last-known-good manifest:\n", r.Revision)
				r.Rollback.Format(stdout, true)
			}
		}
		// Each placement (issue 23), its waves as executed.
		for i, pl := range placements {
			fmt.Fprintf(stdout, "\nplacement #%d, as executed:\n", i+1)
			printPlacement(stdout, pl)
		}
		fmt.Fprintf(stdout, "\n%d workflow runs of %s (one per finished deploy; continue-as-new)\n", len(runs), api.DeployWorkflowID(lease))
		return nil
	}
}

// deployRecords is the lease's deploy records, which the newest run of its
// workflow carries, asked as the status is (Temporal's transient errors
// retried). What cannot be read is an error, never an empty history: on a
// loaded server the query once failed and history printed no deploy at
// all, exit 0 (CI).
func deployRecords(ctx context.Context, c client.Client, lease string) ([]api.DeployRecord, []api.Refusal, error) {
	st, err := queryDeploy(ctx, c, lease, "")
	if err != nil {
		return nil, nil, fmt.Errorf("read the deploy records: %w", err)
	}
	return st.History, st.Refusals, nil
}

// placementHistory is each placement of the lease, oldest first, as it
// ended (or stands, if it runs).
func placementHistory(ctx context.Context, c client.Client, lease string) []api.PlacementStatus {
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf(`WorkflowId = %q`, api.PlacementWorkflowID(lease)),
	})
	if err != nil {
		return nil
	}
	runs := resp.GetExecutions()
	sort.Slice(runs, func(i, j int) bool { return runs[i].GetStartTime().AsTime().Before(runs[j].GetStartTime().AsTime()) })
	var out []api.PlacementStatus
	for _, r := range runs {
		var st api.PlacementStatus
		if r.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			if v, err := c.QueryWorkflow(ctx, r.GetExecution().GetWorkflowId(), r.GetExecution().GetRunId(), api.QueryStatus); err == nil && v.Get(&st) == nil {
				out = append(out, st)
			}
			continue
		}
		err := c.GetWorkflow(ctx, r.GetExecution().GetWorkflowId(), r.GetExecution().GetRunId()).Get(ctx, &st)
		var appErr *temporal.ApplicationError
		if err == nil || (errors.As(err, &appErr) && appErr.Type() == api.ErrPlacement && appErr.Details(&st) == nil) {
			out = append(out, st)
		}
	}
	return out
}
