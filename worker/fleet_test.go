package main_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Helpers of the tests that move many deploys between workers (upgrade,
// SIGKILL of one of several).

// startDeploy creates lease id and starts its first deploy on tq: one
// service "web" of 3 replicas whose pods turn ready readyAfter their start.
func startDeploy(t *testing.T, env *testenv.Env, tq, id, readyAfter string) {
	t.Helper()
	createLease(t, env, id)
	three := int32(3)
	m := manifest.Manifest{Lease: id, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &three,
		PodAnnotations: map[string]string{"deployflow.dev/ready-after": readyAfter}}}}
	// The default safety net (an hour): the workers' observers tell the
	// leases what changes. With a 1s tick, as before, the 20 leases of a
	// test each checked themselves every second, during their rollouts
	// too, for the minutes the test lasts: work on the servers every test
	// shares, and nothing these tests check.
	_, err := env.Temporal.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: api.DeployWorkflowID(id), TaskQueue: tq},
		api.DeployWorkflow, api.DeployInput{Manifest: m})
	require.NoError(t, err)
}

// startDeploys starts n deploys (startDeploy) of leases <base>-0..n-1 and
// waits until every one has been seen mid-rollout: its ReplicaSet exists,
// its pods not all available. All leases are watched in each round (one
// at a time, a lease whose rollout began early could finish before its
// turn under a loaded machine, and the wait would fail).
func startDeploys(t *testing.T, env *testenv.Env, tq, base string, n int, readyAfter string) []string {
	t.Helper()
	var leases []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%d", base, i)
		leases = append(leases, id)
		startDeploy(t, env, tq, id, readyAfter)
	}
	seen := map[string]bool{}
	// Five minutes: on the Temporal server on PostgreSQL, with the rest of
	// the suite beside it, the last of 20 rollouts was seen to start two
	// minutes after its deploy, and once (CI, with a build of every
	// package's tests beside it) three had not started after three (each
	// lease's window is its readyAfter from then).
	testenv.Eventually(t, 5*time.Minute, 250*time.Millisecond, "every lease seen mid-rollout", func() (bool, string) {
		// One list of every lease's ReplicaSets a round, not one a lease.
		all, err := env.Kube.AppsV1().ReplicaSets("").List(context.Background(), metav1.ListOptions{LabelSelector: manifest.ServiceLabel + "=web"})
		if err != nil {
			return false, err.Error()
		}
		byNamespace := map[string][]appsv1.ReplicaSet{}
		for _, rs := range all.Items {
			byNamespace[rs.Namespace] = append(byNamespace[rs.Namespace], rs)
		}
		var waiting []string
		for _, id := range leases {
			if seen[id] {
				continue
			}
			if rss := byNamespace[manifest.Namespace(id)]; len(rss) == 1 && rss[0].Status.AvailableReplicas < 3 {
				seen[id] = true
				continue
			}
			waiting = append(waiting, id)
		}
		return len(waiting) == 0, fmt.Sprintf("not yet seen mid-rollout: %v", waiting)
	})
	return leases
}

// deployEnded waits until lease id's deploy has ended and returns its status.
func deployEnded(t *testing.T, env *testenv.Env, id string) api.DeployStatus {
	t.Helper()
	var st api.DeployStatus
	require.Eventually(t, func() bool {
		v, err := env.Patient().QueryWorkflow(context.Background(), api.DeployWorkflowID(id), "", api.QueryStatus)
		return err == nil && v.Get(&st) == nil && len(st.History) > 0 && st.Phase != api.PhaseDeploying
	}, 3*time.Minute, 250*time.Millisecond, "lease %s never finished its deploy", id)
	return st
}

// assertActiveAndWrittenOnce checks that lease id's deploy ended Active with
// its one ReplicaSet fully available and written once per decision: its
// generation is its create plus the scales its rollout decided.
func assertActiveAndWrittenOnce(t *testing.T, env *testenv.Env, id string) api.DeployStatus {
	t.Helper()
	st := deployEnded(t, env, id)
	assert.Equal(t, api.PhaseActive, st.Phase, "lease %s: %s", id, st.LastError)
	rss, err := env.Kube.AppsV1().ReplicaSets(manifest.Namespace(id)).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, rss.Items, 1, "lease %s: no ReplicaSet created twice", id)
	decided := decidedScales(t, env, api.RolloutWorkflowID(manifest.Namespace(id), "web"), "")[rss.Items[0].Name]
	assert.Equal(t, 1+decided, rss.Items[0].Generation, "lease %s: created once, then one write per decided scale", id)
	assert.Equal(t, int32(3), rss.Items[0].Status.AvailableReplicas, id)
	return st
}
