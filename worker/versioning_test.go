package main_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 9.3: under Temporal Worker Versioning (--deployment-name,
// --build-id) a lease's rollout is pinned to the build that started it and
// its lease workflow auto-upgrades; during an upgrade `temporal worker
// deployment describe` shows both builds, and the deploy in progress
// finishes.
func TestWorkerVersioningPinsRolloutsAndShowsBothBuilds(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	tq := testenv.Name(t, "tq")
	deployment := testenv.ShortName("deployflow")
	startWorker(t, env, tq, freeAddr(t), "--deployment-name", deployment, "--build-id", "build-a")
	handle := env.Temporal.WorkerDeploymentClient().GetHandle(deployment)
	setCurrent := func(build string) {
		t.Helper()
		// The server knows a build once its worker has polled and the
		// server's own deployment workflows have run: seconds, or a minute
		// or more with the rest of the suite beside it.
		// Each attempt may wait a minute for the server's answer: one
		// sent every 500ms with the SDK's short deadline timed out each
		// time for 3 minutes in CI (each one more work queued on the
		// server's own deployment workflow).
		testenv.Eventually(t, 4*time.Minute, 2*time.Second, "version "+build+" never became current", func() (bool, string) {
			actx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, err := handle.SetCurrentVersion(actx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: build})
			return err == nil, fmt.Sprint(err)
		})
	}
	setCurrent("build-a")

	id := testenv.ShortName("lease")
	createLease(t, env, id)
	three := int32(3)
	m := manifest.Manifest{Lease: id, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &three,
		PodAnnotations: map[string]string{"deployflow.dev/ready-after": "8s"}}}}
	_, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: api.DeployWorkflowID(id), TaskQueue: tq},
		api.DeployWorkflow, api.DeployInput{Manifest: m})
	require.NoError(t, err)
	rollout := api.RolloutWorkflowID(manifest.Namespace(id), "web")
	behavior := func(wid string) enumspb.VersioningBehavior {
		d, err := env.Temporal.DescribeWorkflowExecution(ctx, wid, "")
		if err != nil {
			return enumspb.VERSIONING_BEHAVIOR_UNSPECIFIED
		}
		return d.GetWorkflowExecutionInfo().GetVersioningInfo().GetBehavior()
	}
	require.Eventually(t, func() bool { return behavior(rollout) == enumspb.VERSIONING_BEHAVIOR_PINNED },
		60*time.Second, 200*time.Millisecond, "the rollout is not pinned")
	assert.Equal(t, enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE, behavior(api.DeployWorkflowID(id)))

	// Build B joins and becomes current while the rollout runs on A.
	startWorker(t, env, tq, freeAddr(t), "--deployment-name", deployment, "--build-id", "build-b")
	setCurrent("build-b")
	// The temporal CLI shows both builds. Asked until it answers: on the
	// PostgreSQL server with the suite beside it, one describe exited 1
	// (CI), as the server's own deployment workflows caught up.
	testenv.Eventually(t, 3*time.Minute, time.Second, "temporal worker deployment describe never showed both builds", func() (bool, string) {
		out, err := exec.Command(env.Stack.Bin(devstack.Temporal), "worker", "deployment", "describe", "--name", deployment,
			"--address", devstack.TemporalAddress).CombinedOutput()
		return err == nil && strings.Contains(string(out), "build-a") && strings.Contains(string(out), "build-b"), fmt.Sprintf("%v: %s", err, out)
	})

	var st api.DeployStatus
	require.Eventually(t, func() bool {
		v, err := env.Patient().QueryWorkflow(ctx, api.DeployWorkflowID(id), "", api.QueryStatus)
		return err == nil && v.Get(&st) == nil && len(st.History) > 0 && st.Phase == api.PhaseActive
	}, 90*time.Second, 250*time.Millisecond, "the deploy never finished (%+v)", st)
	d, err := env.Temporal.DescribeWorkflowExecution(ctx, rollout, "")
	require.NoError(t, err)
	assert.Equal(t, "build-a", d.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId(),
		"the rollout finished on the build that started it")
}
