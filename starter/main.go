// Command deployflow is the CLI users type: it starts deployflow's
// workflows on Temporal and shows what they do.
//
//	deployflow rollout --namespace shop --service web --image nginx:1.27 --replicas 3
//
// Connection settings are shared with the worker: --temporal-address
// (TEMPORAL_ADDRESS), --temporal-namespace (TEMPORAL_NAMESPACE), --task-queue
// (DEPLOYFLOW_TASK_QUEUE).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/version"
)

// command is one `deployflow <name>` subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout io.Writer) error
}

var commands = map[string]command{
	"rollout":  {"roll one service's pod template out and wait until it is available", runRollout},
	"deploy":   {"deploy a manifest to its lease (-f manifest.yaml [--wait] [--plan] [--yes])", runDeploy},
	"status":   {"show a lease's phase, last deploy, hostnames and IPs (--watch: a live tree)", runStatus},
	"history":  {"list a lease's deploys: trigger, time, outcome, duration", runHistory},
	"approve":  {"approve the plan a lease's deploy is waiting on (manifests with requireApproval)", runApprove},
	"pause":    {"pause a service's rollout in progress: pause <lease> <service>", runPause},
	"resume":   {"resume a paused rollout: resume <lease> <service>", runResume},
	"abort":    {"abort a rollout, back to the last good revision: abort <lease> <service>", runAbort},
	"undo":     {"roll a service back during its rollout: undo <lease> <service> [--to-revision N]", runUndo},
	"scale":    {"scale a service of a lease: scale <lease> <service> <replicas>", runScale},
	"restart":  {"restart every pod of a lease: restart <lease>", runRestart},
	"teardown": {"delete a lease's workload and release its hostnames and IPs", runTeardown},
	"lease":    {"manage leases: create <id> --owner <owner> | close <id> | list", runLease},
	"version":  {"print the CLI's version, build ID and Go version (-o json)", runVersion},
	"schedule": {"scheduled redeploys: create <lease> --cron|--every [--action restart|reapply] | list | delete | trigger", runSchedule},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	progress = stderr
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "deployflow: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintf(stderr, "deployflow %s: %v\n", args[0], err)
			return 2
		}
		var unreachable unreachableError
		if errors.As(err, &unreachable) || cannotReach(err) {
			fmt.Fprintf(stderr, "deployflow %s: %v\n", args[0], err)
			return 3
		}
		fmt.Fprintf(stderr, "deployflow %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "deployflow: durable deployments for Kubernetes, run as Temporal workflows.")
	fmt.Fprintln(w, "\nUsage: deployflow <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'deployflow <command> -h' for a command's flags.")
}

// usageError is a mistake in the command line (exit code 2).
type usageError struct{ error }

// unreachableError is Temporal or the cluster out of reach (exit code 3).
type unreachableError struct{ error }

// cannotReach reports whether err is a failure to reach a server (refused,
// unresolvable, timed out, TLS): exit code 3, like an unreachableError.
func cannotReach(err error) bool {
	var netErr *net.OpError
	var dnsErr *net.DNSError
	var unavailable *serviceerror.Unavailable
	return errors.As(err, &netErr) || errors.As(err, &dnsErr) || errors.As(err, &unavailable) || utilnet.IsConnectionRefused(err) || config.TLSHint(err) != "" ||
		status.Code(err) == codes.Unavailable
}

// runVersion is `deployflow version`.
func runVersion(_ context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	output := fs.String("o", "text", "output: text or json")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	v := version.Get()
	switch *output {
	case "json":
		return json.NewEncoder(stdout).Encode(v)
	case "text":
		fmt.Fprintf(stdout, "deployflow %s (build %s, %s)\n", v.Version, v.BuildID, v.GoVersion)
		return nil
	}
	return usageError{fmt.Errorf("-o %q: want text or json", *output)}
}
