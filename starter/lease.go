package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/internal/manifest"
)

// runLease is `deployflow lease create <id> --owner <owner> | close <id> | list`.
func runLease(g *globals, fs *flag.FlagSet) runner {
	owner := fs.String("owner", "", "the tenant owning the lease (create)")
	return func(ctx context.Context, pos []string, stdout io.Writer) error {
		if len(pos) == 0 {
			return usageError{fmt.Errorf("give a subcommand: create <id> --owner <owner>, close <id> or list")}
		}
		sub, pos := pos[0], pos[1:]
		store, err := g.leases()
		if err != nil {
			return err
		}
		switch sub {
		case "create":
			if len(pos) != 1 || *owner == "" {
				return usageError{fmt.Errorf("usage: deployflow lease create <id> --owner <owner>")}
			}
			if err := lease.ValidateID(pos[0]); err != nil {
				return usageError{err}
			}
			l, err := store.Create(ctx, pos[0], *owner)
			if err != nil {
				return err
			}
			return printLeases(stdout, g, []lease.Lease{*l})
		case "close":
			if len(pos) != 1 {
				return usageError{fmt.Errorf("usage: deployflow lease close <id>")}
			}
			l, err := store.Close(ctx, pos[0])
			if err != nil {
				return err
			}
			// The lease's workflow tears down on its own when it next checks the
			// lease; tell it now so that happens at once.
			if c, err := g.temporal(ctx); err == nil {
				defer c.Close()
				if err := c.SignalWorkflow(ctx, api.DeployWorkflowID(l.ID), "", api.SignalTeardown, nil); err == nil && g.output == "text" {
					fmt.Fprintf(stdout, "lease %s closed; its workload is being torn down (deployflow status %s)\n", l.ID, l.ID)
					return nil
				}
			}
			return printLeases(stdout, g, []lease.Lease{*l})
		case "list":
			ls, err := store.List(ctx)
			if err != nil {
				return err
			}
			return printLeases(stdout, g, ls)
		default:
			return usageError{fmt.Errorf("unknown subcommand %q: want create, close or list", sub)}
		}
	}
}

func printLeases(w io.Writer, g *globals, ls []lease.Lease) error {
	if g.output == "json" {
		return json.NewEncoder(w).Encode(ls)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !g.wide {
		fmt.Fprintln(tw, "LEASE\tOWNER\tSTATE")
		for _, l := range ls {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", l.ID, l.Owner, l.State)
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "LEASE\tOWNER\tSTATE\tNAMESPACE\tWORKFLOW\tCLOSED\tUID")
	for _, l := range ls {
		closed := "-"
		if l.ClosedAt != nil {
			closed = l.ClosedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.ID, l.Owner, l.State, manifest.Namespace(l.ID), api.DeployWorkflowID(l.ID), closed, l.UID)
	}
	return tw.Flush()
}
