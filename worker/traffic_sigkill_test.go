package main_test

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 38's abort target: a canary through the Gateway (the worker
// binary with --routing gateway) aborted at 25%, its worker SIGKILLed the
// moment the abort is answered: every request is on the stable version
// without another worker (the abort's answer waits for the route), and
// the next worker ends the deploy on it.
func TestAnAbortedCanarysTrafficIsOnStableWhenItsWorkerIsKilledRightAfter(t *testing.T) {
	env := testenv.Get(t)
	testenv.DataPlane(t)
	ctx := context.Background()
	tq := testenv.Name(t, "tq")
	id := testenv.ShortName("lease")
	createLease(t, env, id)
	gateway := []string{"--routing", "gateway", "--gateway", devstack.GatewayNamespace + "/" + devstack.GatewayName, "--gateway-listener", devstack.GatewayListener}
	first := startWorker(t, env, tq, freeAddr(t), gateway...)

	host := id + ".apps.example.com"
	ns := manifest.Namespace(id)
	deploy := func(image string) {
		four, w, delay := int32(4), int32(25), int32(1)
		m := manifest.Manifest{Lease: id, Services: []manifest.Service{{Name: "web", Image: image, Replicas: &four,
			Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{host}}}}},
			Rollout: &manifest.Rollout{Strategy: manifest.StrategyCanary, ScaleDownDelaySeconds: &delay,
				Steps: []manifest.CanaryStep{{SetWeight: &w}, {Pause: &manifest.Pause{}}}}}}}
		start := env.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: api.DeployWorkflowID(id), TaskQueue: tq, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, api.DeployWorkflow, api.DeployInput{Manifest: m, Trigger: "test"})
		h, err := env.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{WorkflowID: api.DeployWorkflowID(id), UpdateName: api.UpdateDeploy,
				Args: []any{api.DeployRequest{Manifest: m, Trigger: "test"}}, WaitForStage: client.WorkflowUpdateStageCompleted}})
		require.NoError(t, err)
		require.NoError(t, h.Get(ctx, nil))
		t.Cleanup(func() {
			_ = env.Temporal.TerminateWorkflow(context.Background(), api.DeployWorkflowID(id), "", "test over")
		})
	}
	status := func() api.DeployStatus {
		var st api.DeployStatus
		v, err := env.Patient().QueryWorkflow(ctx, api.DeployWorkflowID(id), "", api.QueryStatus)
		if err == nil {
			_ = v.Get(&st)
		}
		return st
	}
	// answers counts n answers for the host through the Gateway by image.
	answers := func(n int) map[string]int {
		out := map[string]int{}
		httpc := &http.Client{Timeout: 5 * time.Second}
		for range n {
			req, _ := http.NewRequest(http.MethodGet, "http://"+devstack.GatewayAddress+"/", nil)
			req.Host = host
			resp, err := httpc.Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				out["failed"]++
				if err == nil {
					resp.Body.Close()
				}
				continue
			}
			resp.Body.Close()
			out[resp.Header.Get(devstack.HeaderImage)]++
		}
		return out
	}

	deploy("nginx:1.26")
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the first deploy never ended", func() (bool, string) {
		st := status()
		return st.Phase == api.PhaseActive && !st.Pending, string(st.Phase)
	})
	deploy("nginx:1.27")
	routes := env.Dynamic.Resource(activities.HTTPRouteResource).Namespace(ns)
	testenv.Eventually(t, 2*time.Minute, 100*time.Millisecond, "the canary never took 25% of the requests", func() (bool, string) {
		r, err := routes.Get(ctx, manifest.RouteName("web", 80), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
		refs, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "backendRefs")
		w, _, _ := unstructured.NestedInt64(refs[1].(map[string]any), "weight")
		return w == 25 && answers(20)["nginx:1.27"] > 0, fmt.Sprintf("canary weight %d", w)
	})

	h, err := env.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: api.RolloutWorkflowID(ns, "web"),
		UpdateName: api.UpdateAbort, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	<-first.exited

	// No worker runs: the Gateway serves what the abort set.
	testenv.Eventually(t, 10*time.Second, 0, "with its worker killed, the aborted canary still took requests", func() (bool, string) {
		got := answers(20)
		return got["nginx:1.26"] == 20, ""
	})
	t.Logf("every request on the stable version %s after the kill", time.Since(killed).Round(time.Millisecond))
	assert.Equal(t, map[string]int{"nginx:1.26": 100}, answers(100), "the stable version's, with no worker running")

	startWorker(t, env, tq, freeAddr(t), gateway...)
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the next worker never ended the deploy", func() (bool, string) {
		st := status()
		ended := len(st.History) > 0 && st.History[len(st.History)-1].Revision >= 2 && !st.Pending && st.Phase != api.PhaseDeploying
		return ended, fmt.Sprintf("%s, %d deploys", st.Phase, len(st.History))
	})
	assert.Equal(t, map[string]int{"nginx:1.26": 100}, answers(100), "the deploy ended on the stable version")
}
