package main_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/testenv"
	"github.com/deployflow/deployflow/workflows"
)

// Issue 9.4, a live upgrade: 20 leases are mid-deploy (slow pods) on worker
// build A; build B (a deliberately changed, version-gated workflow: go build
// -tags upgradetest) starts and A stops. Every deploy finishes, nothing is
// written twice (each ReplicaSet's generation is one create plus the scales
// its rollout decided), and a lease deployed after the switch runs B's
// behaviour.
func TestLiveUpgradeInTheMiddleOfTwentyDeploys(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	tq := testenv.Name(t, "tq")
	binB := workerBinaryWithTags(t, "upgradetest")
	a := startWorker(t, env, tq, freeAddr(t))

	base := testenv.ShortName("upg")
	deploy := func(id string, readyAfter string) {
		t.Helper()
		createLease(t, env, id)
		three := int32(3)
		m := manifest.Manifest{Lease: id, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &three,
			PodAnnotations: map[string]string{"deployflow.dev/ready-after": readyAfter}}}}
		_, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.DeployWorkflowID(id), TaskQueue: tq},
			workflows.DeployWorkflow, workflows.DeployInput{Manifest: m, HealthIntervalSeconds: 1})
		require.NoError(t, err)
	}
	var leases []string
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("%s-%d", base, i)
		leases = append(leases, id)
		deploy(id, "10s")
	}
	// All 20 are mid-rollout on A: their ReplicaSets exist, pods not ready.
	for _, id := range leases {
		require.Eventually(t, func() bool {
			rss, err := env.Kube.AppsV1().ReplicaSets(manifest.Namespace(id)).List(ctx, metav1.ListOptions{})
			return err == nil && len(rss.Items) == 1 && rss.Items[0].Status.AvailableReplicas < 3
		}, 90*time.Second, 100*time.Millisecond, "lease %s never got mid-rollout on build A", id)
	}

	// The upgrade: B starts, A stops (SIGTERM: it drains and exits).
	startWorkerBinary(t, env, binB, tq, freeAddr(t))
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-a.exited:
		require.NoError(t, err, "build A exits cleanly")
	case <-time.After(30 * time.Second):
		t.Fatal("build A still running 30s after SIGTERM")
	}

	status := func(id string) workflows.DeployStatus {
		var st workflows.DeployStatus
		require.Eventually(t, func() bool {
			v, err := env.Temporal.QueryWorkflow(ctx, workflows.DeployWorkflowID(id), "", workflows.QueryDeploy)
			return err == nil && v.Get(&st) == nil && len(st.History) > 0 && st.Phase != workflows.PhaseDeploying
		}, 120*time.Second, 250*time.Millisecond, "lease %s never finished its deploy", id)
		return st
	}
	for _, id := range leases {
		st := status(id)
		assert.Equal(t, workflows.PhaseActive, st.Phase, "lease %s: %s", id, st.LastError)
		rss, err := env.Kube.AppsV1().ReplicaSets(manifest.Namespace(id)).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, rss.Items, 1, "lease %s: no ReplicaSet created twice", id)
		decided := decidedScales(t, env, workflows.RolloutWorkflowID(manifest.Namespace(id), "web"), "")[rss.Items[0].Name]
		assert.Equal(t, 1+decided, rss.Items[0].Generation, "lease %s: created once, then one write per decided scale", id)
		assert.Equal(t, int32(3), rss.Items[0].Status.AvailableReplicas, id)
	}

	// A lease deployed after the switch runs build B's behaviour.
	after := base + "-after"
	deploy(after, "1s")
	st := status(after)
	require.Equal(t, workflows.PhaseActive, st.Phase, st.LastError)
	assert.Contains(t, st.History[len(st.History)-1].Outcome, "(build B)")
}
