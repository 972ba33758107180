package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/deployflow/deployflow/api"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// ScheduleID is the Temporal Schedule of a lease's scheduled redeploys.
func ScheduleID(lease, action string) string { return "redeploy-" + lease + "-" + action }

// runSchedule is `deployflow schedule create|list|delete|trigger`. The
// schedules are ordinary Temporal Schedules: `temporal schedule trigger`,
// `toggle --pause` and `backfill` work on them too.
func runSchedule(g *globals, fs *flag.FlagSet) runner {
	cron := fs.String("cron", "", `when, as a cron expression, e.g. "0 3 * * *" (03:00 UTC daily)`)
	every := fs.Duration("every", 0, "when, as an interval, e.g. 6h")
	action := fs.String("action", api.RedeployRestart, "restart (roll every pod) or reapply (deploy the last good manifest again)")
	paused := fs.Bool("paused", false, "create the schedule paused")
	return func(ctx context.Context, pos []string, stdout io.Writer) error {
		if len(pos) == 0 {
			return usageError{errors.New("give a subcommand: create <lease> --cron|--every [--action restart|reapply], list, delete <schedule>, trigger <schedule>")}
		}
		sub, pos := pos[0], pos[1:]
		c, err := g.temporal(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		sc := c.ScheduleClient()

		switch sub {
		case "create":
			if len(pos) != 1 {
				return usageError{errors.New("usage: deployflow schedule create <lease> (--cron EXPR | --every DURATION) [--action restart|reapply]")}
			}
			if *action != api.RedeployRestart && *action != api.RedeployReapply {
				return usageError{fmt.Errorf("--action %q: want restart or reapply", *action)}
			}
			var spec client.ScheduleSpec
			switch {
			case *cron != "" && *every != 0:
				return usageError{errors.New("give --cron or --every, not both")}
			case *cron != "":
				spec.CronExpressions = []string{*cron}
			case *every > 0:
				spec.Intervals = []client.ScheduleIntervalSpec{{Every: *every}}
			default:
				return usageError{errors.New(`give --cron "0 3 * * *" or --every 6h`)}
			}
			lease := pos[0]
			id := ScheduleID(lease, *action)
			_, err := sc.Create(ctx, client.ScheduleOptions{
				ID:      id,
				Spec:    spec,
				Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
				Paused:  *paused,
				Note:    fmt.Sprintf("deployflow: %s lease %s", *action, lease),
				Action: &client.ScheduleWorkflowAction{
					ID:        "scheduled-" + lease + "-" + *action,
					Workflow:  api.ScheduledDeployWorkflow,
					Args:      []any{api.ScheduledDeployInput{Lease: lease, Action: *action}},
					TaskQueue: g.cfg.TaskQueue,
				},
			})
			if err != nil {
				return fmt.Errorf("create schedule %s: %w", id, err)
			}
			fmt.Fprintf(stdout, "schedule %s created: %s lease %s %s (overlap: skip)\n  trigger now: deployflow schedule trigger %s\n", id, *action, lease, describeSpec(spec), id)
			return nil
		case "list":
			it, err := sc.List(ctx, client.ScheduleListOptions{})
			if err != nil {
				return err
			}
			var rows []map[string]any
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			if g.output == "text" {
				fmt.Fprintln(tw, "SCHEDULE\tPAUSED\tNEXT RUN\tNOTE")
			}
			for it.HasNext() {
				e, err := it.Next()
				if err != nil {
					return err
				}
				if !strings.HasPrefix(e.ID, "redeploy-") {
					continue
				}
				next := ""
				if len(e.NextActionTimes) > 0 {
					next = e.NextActionTimes[0].UTC().Format(time.RFC3339)
				}
				rows = append(rows, map[string]any{"id": e.ID, "paused": e.Paused, "next": next, "note": e.Note})
				if g.output == "text" {
					fmt.Fprintf(tw, "%s\t%t\t%s\t%s\n", e.ID, e.Paused, next, e.Note)
				}
			}
			if g.output == "json" {
				return json.NewEncoder(stdout).Encode(rows)
			}
			return tw.Flush()
		case "delete", "trigger":
			if len(pos) != 1 {
				return usageError{fmt.Errorf("usage: deployflow schedule %s <schedule>", sub)}
			}
			h := sc.GetHandle(ctx, pos[0])
			if sub == "delete" {
				err = h.Delete(ctx)
			} else {
				err = h.Trigger(ctx, client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL})
			}
			if err != nil {
				return fmt.Errorf("%s schedule %s: %w", sub, pos[0], err)
			}
			fmt.Fprintf(stdout, "schedule %s: %sd\n", pos[0], strings.TrimSuffix(sub, "e"))
			return nil
		default:
			return usageError{fmt.Errorf("unknown subcommand %q: want create, list, delete or trigger", sub)}
		}
	}
}

func describeSpec(s client.ScheduleSpec) string {
	if len(s.CronExpressions) > 0 {
		return "on cron " + strings.Join(s.CronExpressions, ", ")
	}
	return "every " + s.Intervals[0].Every.String()
}
