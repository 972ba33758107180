// Command deployflow is the CLI users type: it starts deployflow's
// workflows on Temporal and shows what they do. A cobra command tree, shaped
// like kubectl's: help with examples, `completion bash|zsh|fish`,
// `-o json|yaml|wide`, `--context`, `--timeout` on waits.
//
// Exit codes: 0 success; 1 the deploy or rollout failed, or a deadline
// (--timeout, progress deadline) passed; 2 bad input (flags, arguments,
// manifest); 3 Temporal or the cluster cannot be reached.
//
// Connection settings are shared with the worker (internal/config):
// Temporal as the temporal CLI configures it (TEMPORAL_* variables, the
// temporal.toml profiles, --temporal-* flags), Kubernetes as kubectl finds
// it (--kubeconfig, KUBECONFIG, ~/.kube/config, --context).
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
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"sigs.k8s.io/yaml"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/version"
)

// runner runs a command with its positional arguments; flags are parsed.
type runner func(ctx context.Context, pos []string, out io.Writer) error

// command is one `deployflow <name>`: build declares its own flags on fs
// (the shared ones are in g) and returns what it runs.
type command struct {
	name, args, short, long, example string
	validArgs                        []string
	build                            func(g *globals, fs *flag.FlagSet) runner
}

var commands = []command{
	{name: "lease", args: "create <id> --owner <owner> | close <id> | list", validArgs: []string{"create", "close", "list"},
		short: "Create, close and list leases", build: runLease,
		long:    "A lease is a tenant's right to run a workload: deployflow deploys only to active leases, in the lease's\nown namespace (lease-<id>). Closing a lease tears its workload down and releases its hostnames and IPs.",
		example: "  deployflow lease create demo-shop --owner acme\n  deployflow lease list -o wide\n  deployflow lease close demo-shop"},
	{name: "deploy", args: "-f manifest.yaml [--wait] [--plan] [--yes]", short: "Deploy a manifest to its lease", build: runDeploy,
		long:    "Starts or updates the lease's workflow (deploy-<lease>) with the manifest. --wait waits until the deploy\nends (exit 0 when Active, 1 when it failed); --plan prints what the deploy would do and asks before deploying.\nA manifest with a placement starts the lease's placement (placement-<lease>): its waves of clusters, in order.",
		example: "  deployflow deploy -f examples/shop.yaml --wait\n  deployflow deploy -f examples/shop.yaml --plan\n  deployflow deploy -f examples/shop.yaml --wait --timeout 5m"},
	{name: "status", args: "<lease> [--watch]", short: "Show a lease's phase, deploy, hostnames and IPs", build: runStatus,
		long:    "--watch draws a live tree of the rollouts until the deploy ends: exit 0 when Active, 1 on failure or --timeout.",
		example: "  deployflow status demo-shop\n  deployflow status demo-shop --watch\n  deployflow status demo-shop -o yaml"},
	{name: "history", args: "<lease>", short: "List a lease's deploys: trigger, time, outcome, duration", build: runHistory,
		example: "  deployflow history demo-shop"},
	{name: "approve", args: "<lease>", short: "Approve the plan a lease's deploy waits on (requireApproval)", build: runApprove,
		example: "  deployflow approve demo-shop"},
	{name: "pause", args: "<lease> <service>", short: "Pause a service's rollout in progress", build: runPause,
		example: "  deployflow pause demo-shop web"},
	{name: "resume", args: "<lease> <service>", short: "Resume a paused rollout", build: runResume,
		example: "  deployflow resume demo-shop web"},
	{name: "promote", args: "<lease> [<service>] [--full]", short: "Promote a canary past its pause or analysis (--full: past every step); with the lease alone, its placement's held wave", build: runPromote,
		example: "  deployflow promote demo-shop web\n  deployflow promote demo-shop web --full\n  deployflow promote demo-fleet"},
	{name: "abort", args: "<lease> [<service>]", short: "Abort a rollout, back to the last good revision; with the lease alone, its placement, every cluster back", build: runAbort,
		example: "  deployflow abort demo-shop web\n  deployflow abort demo-shop"},
	{name: "undo", args: "<lease> <service> [--to-revision N]", short: "Roll a service back during its rollout", build: runUndo,
		example: "  deployflow undo demo-shop web\n  deployflow undo demo-shop web --to-revision 2"},
	{name: "retry", args: "<lease>", short: "Deploy a lease's last failed manifest again (an aborted canary or blue-green)", build: runRetry,
		example: "  deployflow retry demo-shop"},
	{name: "rollback", args: "<lease> [--to N]", short: "Return a lease to a recorded successful deploy (its ReplicaSets scaled back up)", build: runRollback,
		long:    "Deploys the manifest of deploy N again (default: the one before the deploy running), as kubectl rollout undo:\neach service's ReplicaSet of that deploy is scaled back up through its strategy, and none is made. The lease\nkeeps its last 10 successful deploys to return to (deployflow status -o json: rollbackTargets).",
		example: "  deployflow rollback demo-shop\n  deployflow rollback demo-shop --to 3"},
	{name: "reject", args: "<lease> <revision>", short: "Mark a deploy that no retry, schedule, placement return or rollback deploys again", build: runReject,
		example: "  deployflow reject demo-shop 4"},
	{name: "scale", args: "<lease> <service> <replicas>", short: "Scale a service of a lease", build: runScale,
		example: "  deployflow scale demo-shop web 6"},
	{name: "restart", args: "<lease>", short: "Restart every pod of a lease (a new revision)", build: runRestart,
		example: "  deployflow restart demo-shop"},
	{name: "teardown", args: "<lease>", short: "Delete a lease's workload and release its hostnames and IPs", build: runTeardown,
		example: "  deployflow teardown demo-shop"},
	{name: "schedule", args: "create <lease> (--cron EXPR | --every DURATION) [--action restart|reapply] | list | delete <id> | trigger <id>",
		validArgs: []string{"create", "list", "delete", "trigger"}, short: "Scheduled redeploys (Temporal Schedules)", build: runSchedule,
		example: "  deployflow schedule create demo-shop --cron \"0 3 * * *\" --action restart\n  deployflow schedule list\n  deployflow schedule trigger redeploy-demo-shop-restart"},
	{name: "rollout", args: "--namespace <ns> --service <name> --image <image> [--replicas N] | -f deployment.yaml",
		short: "Roll one service's pod template out and wait until it is available (no lease)", build: runRollout,
		example: "  deployflow rollout --namespace shop --service web --image nginx:1.27 --replicas 3\n  deployflow rollout -f deployment.yaml --timeout 10m"},
	{name: "codec-key", args: "[--id ID] [--rotate keys.json]", short: "Print a new keys file for the payload codec, or one with a new active key",
		long:    "Every worker and CLI of a Temporal namespace encrypts what it writes with the same keys file\n(--codec-keys-file): the active key encrypts, every key in it decrypts. Keep retired keys until nothing they\nencrypted is read.",
		build:   runCodecKey,
		example: "  deployflow codec-key --id 2026-11 > keys.json\n  deployflow codec-key --id 2027-05 --rotate keys.json > keys.new.json"},
	{name: "codec-server", args: "--listen ADDR --token-file FILE [--cors-origin URL]", short: "Serve the payload codec to the Temporal UI and the temporal CLI",
		long:    "Temporal's remote codec protocol (POST /encode, /decode) over --codec-keys-file, for an operator who shows\none of the tokens: the temporal CLI's --codec-endpoint and --codec-auth 'Bearer <token>'; the UI's codec\nendpoint with its access token passed (OIDC), or, without OIDC, with \"include cross-origin credentials\"\nafter signing in at the server's /login (a session cookie; the UI and this server on one site).",
		build:   runCodecServer,
		example: "  deployflow codec-server --codec-keys-file keys.json --token-file tokens --cors-origin http://127.0.0.1:8233\n  temporal workflow show -w deploy-demo-shop --codec-endpoint http://127.0.0.1:8081 --codec-auth \"Bearer $TOKEN\""},
	{name: "version", short: "Print the CLI's version, build ID and Go version", build: runVersion,
		example: "  deployflow version -o json"},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	name := "deployflow"
	if cmd != nil && cmd != root {
		name += " " + cmd.Name()
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	var u usageError
	var unreachable unreachableError
	switch {
	case errors.As(err, &u):
		return 2
	case errors.As(err, &unreachable) || cannotReach(err):
		return 3
	}
	return 1
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "deployflow",
		Short: "Durable deployments for Kubernetes, run as Temporal workflows",
		Long: "deployflow deploys a tenant's lease (namespace, Services, Ingress, ReplicaSets) and rolls it out with the\n" +
			"Kubernetes Deployment controller's semantics, as Temporal workflows.\n\n" +
			"Exit codes: 0 ok; 1 the deploy or rollout failed, or a deadline passed; 2 bad input; 3 Temporal or the\n" +
			"cluster cannot be reached.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q: see 'deployflow --help'", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
			return usageError{errors.New("give a command")}
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().Duration("timeout", 0, "give up after this long (e.g. 5m) with exit code 1; 0: no limit")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, c := range commands {
		root.AddCommand(c.cobra())
	}
	return root
}

// cobra makes the cobra command of c: its Go flags (the shared ones and its
// own) become the command's flags, so help and completion list them.
func (c command) cobra() *cobra.Command {
	g := &globals{}
	fs := newFlags(c.name, g)
	r := c.build(g, fs)
	cmd := &cobra.Command{
		Use:       strings.TrimSpace(c.name + " " + c.args),
		Short:     c.short,
		Long:      c.long,
		Example:   c.example,
		ValidArgs: c.validArgs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			if err := g.validate(); err != nil {
				return err
			}
			timeout, err := cmd.Flags().GetDuration("timeout") // the root's, on every command
			if err != nil {
				return err
			}
			ctx := withRetrying(cmd.Context(), retrying{bound: g.temporalRetry, progress: cmd.ErrOrStderr()})
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			out := cmd.OutOrStdout()
			switch g.output {
			case "yaml":
				y := newYAMLWriter(out)
				defer y.Close()
				g.output, out = "json", y
			case "json":
				j := newJSONWriter(out)
				defer j.Close()
				out = j
			}
			err = r(ctx, pos, out)
			if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && timeout > 0 {
				return fmt.Errorf("timed out after %s (--timeout): %w", timeout, err)
			}
			return err
		},
	}
	if len(c.validArgs) == 0 {
		cmd.ValidArgsFunction = cobra.NoFileCompletions
	}
	cmd.Flags().AddGoFlagSet(fs)
	_ = cmd.RegisterFlagCompletionFunc("o", cobra.FixedCompletions([]string{"text", "json", "yaml", "wide"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json", "yaml", "wide"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// yamlWriter turns the JSON values a command writes into YAML documents,
// as they come (status --watch writes one per change).
type yamlWriter struct {
	pw   *io.PipeWriter
	done chan struct{}
}

func newYAMLWriter(out io.Writer) *yamlWriter {
	pr, pw := io.Pipe()
	y := &yamlWriter{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(y.done)
		dec := json.NewDecoder(pr)
		for first := true; ; first = false {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				_, _ = io.Copy(io.Discard, pr)
				return
			}
			b, err := yaml.JSONToYAML(redact(v))
			if err != nil {
				continue
			}
			if !first {
				_, _ = io.WriteString(out, "---\n")
			}
			_, _ = out.Write(b)
		}
	}()
	return y
}

func (y *yamlWriter) Write(p []byte) (int, error) { return y.pw.Write(p) }

// Close flushes the last document.
func (y *yamlWriter) Close() error {
	err := y.pw.Close()
	<-y.done
	return err
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
	return errors.As(err, &netErr) || errors.As(err, &dnsErr) || errors.As(err, &unavailable) ||
		utilnet.IsConnectionRefused(err) || config.TLSHint(err) != "" || status.Code(err) == codes.Unavailable
}

// runVersion is `deployflow version`.
func runVersion(g *globals, _ *flag.FlagSet) runner {
	return func(_ context.Context, _ []string, stdout io.Writer) error {
		v := version.Get()
		if g.output == "json" {
			return json.NewEncoder(stdout).Encode(v)
		}
		fmt.Fprintf(stdout, "deployflow %s (build %s, %s)\n", v.Version, v.BuildID, v.GoVersion)
		return nil
	}
}
