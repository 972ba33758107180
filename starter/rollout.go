package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/deployflow/deployflow/api"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func runRollout(g *globals, fs *flag.FlagSet) runner {
	namespace := fs.String("namespace", "default", "Kubernetes namespace (created if missing)")
	service := fs.String("service", "", "service name; the ReplicaSet is <service>-<pod-template-hash>")
	image := fs.String("image", "", "container image (when no --file is given)")
	replicas := fs.Int("replicas", 1, "desired replicas (when no --file is given)")
	file := fs.String("f", "", "a Deployment (YAML or JSON) describing the desired state, instead of --image/--replicas")
	wait := fs.Bool("wait", true, "wait until the rollout completes")
	return func(ctx context.Context, _ []string, stdout io.Writer) error {
		cfg, output := g.cfg, &g.output

		in := api.RolloutInput{Namespace: *namespace, Service: *service}
		switch {
		case *file != "":
			b, err := os.ReadFile(*file)
			if err != nil {
				return usageError{fmt.Errorf("-f: %w", err)}
			}
			if err := yaml.UnmarshalStrict(b, &in.Deployment); err != nil {
				return usageError{fmt.Errorf("-f %s: %w", *file, err)}
			}
			if in.Service == "" {
				in.Service = in.Deployment.Name
			}
		case *image != "":
			r := int32(*replicas)
			in.Deployment.Spec.Replicas = &r
			in.Deployment.Spec.Template.Spec.Containers = []corev1.Container{{Name: *service, Image: *image}}
		default:
			return usageError{fmt.Errorf("give --image (and --replicas) or -f deployment.yaml")}
		}
		if in.Service == "" {
			return usageError{fmt.Errorf("--service is required (or metadata.name in -f)")}
		}

		c, err := (&globals{cfg: cfg}).temporal(ctx)
		if err != nil {
			return err
		}
		defer c.Close()

		id := api.RolloutWorkflowID(in.Namespace, in.Service)
		var run client.WorkflowRun
		err = retryTemporal(ctx, "start the rollout of "+in.Namespace+"/"+in.Service, func() error {
			var err error
			run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID:                       id,
				TaskQueue:                cfg.TaskQueue,
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
				// Without it the SDK would hand back the running rollout's run.
				WorkflowExecutionErrorWhenAlreadyStarted: true,
				StaticSummary:                            fmt.Sprintf("rollout %s/%s", in.Namespace, in.Service),
			}, api.RolloutWorkflow, in)
			return err
		})
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return runningRollout(ctx, c, id, in)
		}
		if err != nil {
			return fmt.Errorf("start rollout: %w", err)
		}
		link := workflowURL(cfg, run.GetID(), run.GetRunID())
		if *output == "text" {
			fmt.Fprintf(stdout, "rollout %s/%s started: workflow %s\n  %s\n", in.Namespace, in.Service, run.GetID(), link)
		}
		if !*wait {
			if *output == "json" {
				return json.NewEncoder(stdout).Encode(map[string]string{"workflowId": run.GetID(), "runId": run.GetRunID(), "url": link})
			}
			return nil
		}
		t0 := time.Now()
		var res api.RolloutResult
		if err := run.Get(ctx, &res); err != nil {
			return fmt.Errorf("rollout %s/%s failed: %w\n  see %s", in.Namespace, in.Service, err, link)
		}
		if *output == "json" {
			return json.NewEncoder(stdout).Encode(res)
		}
		fmt.Fprintf(stdout, "replicaset %q successfully rolled out: %d/%d available (%s)\n",
			res.NewReplicaSet, res.AvailableReplicas, res.Replicas, time.Since(t0).Round(100*time.Millisecond))
		return nil
	}
}

// runningRollout explains why a rollout of the same service cannot start:
// one runs already. deployflow never attaches to it silently, which would
// report its outcome as the outcome of a desired state it never had.
func runningRollout(ctx context.Context, c client.Client, id string, in api.RolloutInput) error {
	want := ""
	if cs := in.Deployment.Spec.Template.Spec.Containers; len(cs) > 0 {
		want = cs[0].Image
	}
	running := "another desired state"
	if v, err := c.QueryWorkflow(ctx, id, "", api.QueryStatus); err == nil {
		var st api.RolloutStatus
		if v.Get(&st) == nil {
			for _, rs := range st.ReplicaSets {
				if rs.New {
					running = fmt.Sprintf("%s with %d replicas", rs.Image, st.DesiredReplicas)
				}
			}
		}
	}
	return fmt.Errorf("a rollout of %s/%s is already running (workflow %s, rolling out %s); nothing was started for %s: "+
		"wait for it to finish, or stop it with 'temporal workflow update execute --workflow-id %s --name abort', then run this again",
		in.Namespace, in.Service, id, running, want, id)
}
