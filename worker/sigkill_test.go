package main_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/worker/testenv"
)

func web(image, readyAfter string) appsv1.Deployment {
	replicas := int32(10)
	return appsv1.Deployment{Spec: appsv1.DeploymentSpec{
		Replicas: &replicas,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"deployflow.dev/ready-after": readyAfter}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
		},
	}}
}

// The worker is SIGKILLed in the middle of a rollout and started again: the
// rollout completes, no ReplicaSet is duplicated, and nothing was done twice
// to the cluster — each ReplicaSet's generation (bumped by every spec write)
// matches the scale operations the workflow decided, one write each.
func TestRolloutSurvivesWorkerSIGKILL(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	tq := testenv.Name(t, "tq")
	ctx := context.Background()
	first := startWorker(t, env, tq, freeAddr(t))

	start := func(d appsv1.Deployment) client.WorkflowRun {
		run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.Name(t, "rollout"), TaskQueue: tq},
			api.RolloutWorkflow, api.RolloutInput{Namespace: ns, Service: "web", Deployment: d})
		require.NoError(t, err)
		return run
	}
	var v1 api.RolloutResult
	require.NoError(t, start(web("nginx:1.26", "0s")).Get(ctx, &v1))
	oldRS, err := env.Kube.AppsV1().ReplicaSets(ns).Get(ctx, v1.NewReplicaSet, metav1.GetOptions{})
	require.NoError(t, err)

	run := start(web("nginx:1.27", "2s"))
	require.Eventually(t, func() bool {
		v, err := env.Patient().QueryWorkflow(ctx, run.GetID(), run.GetRunID(), api.QueryStatus)
		if err != nil {
			return false
		}
		var st api.RolloutStatus
		return v.Get(&st) == nil && st.UpdatedReplicas >= 3 && st.AvailableReplicas < 10+3
	}, 2*time.Minute, 20*time.Millisecond, "rollout never got under way")

	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	<-first.exited
	startWorker(t, env, tq, freeAddr(t))

	var v2 api.RolloutResult
	require.NoError(t, run.Get(ctx, &v2), "the rollout completes on the restarted worker")
	assert.Equal(t, int32(10), v2.AvailableReplicas)

	list, err := env.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 2, "no duplicate ReplicaSet")

	// Spec writes the workflow decided, per ReplicaSet: the scale local
	// activities recorded in its history.
	decided := decidedScales(t, env, run.GetID(), run.GetRunID())
	for _, rs := range list.Items {
		switch rs.Name {
		case v2.NewReplicaSet:
			assert.Equal(t, 1+decided[rs.Name], rs.Generation, "new ReplicaSet: created once, then one write per decided scale")
		case oldRS.Name:
			assert.Equal(t, oldRS.Generation+decided[rs.Name], rs.Generation, "old ReplicaSet: one write per decided scale")
			assert.Equal(t, int32(0), *rs.Spec.Replicas)
		default:
			t.Errorf("unexpected ReplicaSet %s", rs.Name)
		}
	}
	assert.Positive(t, decided[v2.NewReplicaSet])
	assert.Positive(t, decided[oldRS.Name])
}

// decidedScales counts, per ReplicaSet, the spec writes a rollout decided:
// the scales its local activities (ScaleReplicaSet, or ApplyPlan's) recorded
// in its history that changed a size.
func decidedScales(t *testing.T, env *testenv.Env, workflowID, runID string) map[string]int64 {
	t.Helper()
	decided := map[string]int64{}
	it := env.Temporal.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	dc := converter.GetDefaultDataConverter()
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "LocalActivity" || m.GetFailure() != nil {
			continue
		}
		var data struct{ ActivityType string }
		require.NoError(t, dc.FromPayloads(m.GetDetails()["data"], &data))
		var scales []activities.ScaleResult
		switch data.ActivityType {
		case "ScaleReplicaSet": // runs before fewer-events
			var res activities.ScaleResult
			require.NoError(t, dc.FromPayloads(m.GetDetails()["result"], &res))
			scales = append(scales, res)
		case "ApplyPlan":
			var res activities.ApplyPlanResult
			require.NoError(t, dc.FromPayloads(m.GetDetails()["result"], &res))
			scales = res.Scales
		}
		for _, res := range scales {
			if res.From != res.To {
				decided[res.ReplicaSet]++
			}
		}
	}
	return decided
}
