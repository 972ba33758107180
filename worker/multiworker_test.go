package main_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
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

// Issue 10.5: three workers share a task queue; one is SIGKILLed while 20
// deploys are mid-rollout. Every deploy finishes on the others, nothing is
// written twice (each ReplicaSet's generation is its create plus the
// scales its rollout decided), and deployflow_leases{phase} is the fleet's
// count on every worker — and on a worker started after all of them died.
func TestTwentyDeploysSurviveOneOfThreeWorkersSIGKILLed(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	tq := testenv.Name(t, "tq")
	var workers []*workerProcess
	var addrs []string
	for i := 0; i < 3; i++ {
		addrs = append(addrs, freeAddr(t))
		workers = append(workers, startWorker(t, env, tq, addrs[i]))
	}

	base := testenv.ShortName("mw")
	var leases []string
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("%s-%d", base, i)
		leases = append(leases, id)
		createLease(t, env, id)
		three := int32(3)
		m := manifest.Manifest{Lease: id, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &three,
			PodAnnotations: map[string]string{"deployflow.dev/ready-after": "8s"}}}}
		_, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.DeployWorkflowID(id), TaskQueue: tq},
			workflows.DeployWorkflow, workflows.DeployInput{Manifest: m, HealthIntervalSeconds: 1})
		require.NoError(t, err)
	}
	for _, id := range leases {
		require.Eventually(t, func() bool {
			rss, err := env.Kube.AppsV1().ReplicaSets(manifest.Namespace(id)).List(ctx, metav1.ListOptions{})
			return err == nil && len(rss.Items) == 1 && rss.Items[0].Status.AvailableReplicas < 3
		}, 90*time.Second, 100*time.Millisecond, "lease %s never got mid-rollout", id)
	}
	require.NoError(t, workers[0].cmd.Process.Signal(syscall.SIGKILL))
	<-workers[0].exited

	for _, id := range leases {
		var st workflows.DeployStatus
		require.Eventually(t, func() bool {
			v, err := env.Temporal.QueryWorkflow(ctx, workflows.DeployWorkflowID(id), "", workflows.QueryDeploy)
			return err == nil && v.Get(&st) == nil && len(st.History) > 0 && st.Phase != workflows.PhaseDeploying
		}, 3*time.Minute, 250*time.Millisecond, "lease %s never finished its deploy", id)
		assert.Equal(t, workflows.PhaseActive, st.Phase, "lease %s: %s", id, st.LastError)
		rss, err := env.Kube.AppsV1().ReplicaSets(manifest.Namespace(id)).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, rss.Items, 1, "lease %s: no ReplicaSet created twice", id)
		decided := decidedScales(t, env, workflows.RolloutWorkflowID(manifest.Namespace(id), "web"), "")[rss.Items[0].Name]
		assert.Equal(t, 1+decided, rss.Items[0].Generation, "lease %s: created once, then one write per decided scale", id)
	}

	// Every surviving worker reports the fleet: 20 Active.
	for _, addr := range addrs[1:] {
		waitLeasesGauge(t, addr, "Active", 20)
	}
	// All die; a new worker reports the same from its first scrape.
	for _, w := range workers[1:] {
		require.NoError(t, w.cmd.Process.Signal(syscall.SIGKILL))
		<-w.exited
	}
	fresh := freeAddr(t)
	startWorker(t, env, tq, fresh)
	waitLeasesGauge(t, fresh, "Active", 20)
}

var leasesGauge = regexp.MustCompile(`(?m)^deployflow_leases\{phase="([A-Za-z]+)"\} (\d+)$`)

// waitLeasesGauge waits until the worker at addr exports
// deployflow_leases{phase} = want.
func waitLeasesGauge(t *testing.T, addr, phase string, want int) {
	t.Helper()
	var last string
	require.Eventually(t, func() bool {
		last = get("http://" + addr + "/metrics")
		for _, m := range leasesGauge.FindAllStringSubmatch(last, -1) {
			if n, _ := strconv.Atoi(m[2]); m[1] == phase && n == want {
				return true
			}
		}
		return false
	}, 60*time.Second, 500*time.Millisecond, "worker %s: want deployflow_leases{phase=%q} %d; has:\n%v", addr, phase, want,
		leasesGauge.FindAllString(last, -1))
}
