package workflows_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/worker/testenv"
)

func deployment(replicas int32, podAnnotations, podLabels map[string]string) appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	for k, v := range podLabels {
		labels[k] = v
	}
	return appsv1.Deployment{Spec: appsv1.DeploymentSpec{
		Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: podAnnotations},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
		},
	}}
}

func startRollout(t *testing.T, env *testenv.Env, tq string, in api.RolloutInput) client.WorkflowRun {
	t.Helper()
	run, err := env.Temporal.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID:        testenv.Name(t, "rollout"),
		TaskQueue: tq,
	}, api.RolloutWorkflow, in)
	require.NoError(t, err)
	return run
}

func TestRolloutWorkflowCreatesReplicaSetAndWaitsUntilAvailable(t *testing.T) {
	env := testenv.Get(t)
	ns, tq := env.Namespace(t), env.Worker(t)
	ctx := context.Background()

	in := api.RolloutInput{Namespace: ns, Service: "web",
		Deployment: deployment(5, map[string]string{"deployflow.dev/ready-after": "1s"}, nil)}
	run := startRollout(t, env, tq, in)
	var res api.RolloutResult
	require.NoError(t, run.Get(ctx, &res))

	rs, err := env.Kube.AppsV1().ReplicaSets(ns).Get(ctx, res.NewReplicaSet, metav1.GetOptions{})
	require.NoError(t, err, "the ReplicaSet the workflow reports must exist")
	hash := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	require.NotEmpty(t, hash)
	assert.Equal(t, "web-"+hash, rs.Name, "named <service>-<pod-template-hash>")
	assert.Equal(t, hash, rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey])
	assert.Equal(t, "1", rs.Annotations["deployment.kubernetes.io/revision"])
	assert.Equal(t, int32(5), *rs.Spec.Replicas)
	assert.Equal(t, int32(5), rs.Status.AvailableReplicas, "the workflow returns only once every replica is available")
	assert.Equal(t, int32(5), res.AvailableReplicas)

	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "pod-template-hash=" + hash})
	require.NoError(t, err)
	assert.Len(t, pods.Items, 5)

	// Waits are watches inside activities that return on a change, not a
	// polling loop in the workflow: a 5-replica rollout whose pods take 1s
	// is a handful of syncs (namespace, defaults, reads, create, waits).
	assert.LessOrEqual(t, countEvents(t, env, run, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), 12)
}

func TestRolloutWorkflowIsIdempotent(t *testing.T) {
	env := testenv.Get(t)
	ns, tq := env.Namespace(t), env.Worker(t)
	ctx := context.Background()
	in := api.RolloutInput{Namespace: ns, Service: "web", Deployment: deployment(2, nil, nil)}

	var first, second api.RolloutResult
	require.NoError(t, startRollout(t, env, tq, in).Get(ctx, &first))
	require.NoError(t, startRollout(t, env, tq, in).Get(ctx, &second))
	assert.Equal(t, first.NewReplicaSet, second.NewReplicaSet, "the same template maps to the same ReplicaSet")

	list, err := env.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, list.Items, 1, "running the same rollout again creates nothing new")
}

func TestRolloutWorkflowFailsAtProgressDeadline(t *testing.T) {
	env := testenv.Get(t)
	ns, tq := env.Namespace(t), env.Worker(t)
	d := deployment(2, nil, map[string]string{"deployflow.dev/never-ready": "true"})
	deadline := int32(3)
	d.Spec.ProgressDeadlineSeconds = &deadline

	err := startRollout(t, env, tq, api.RolloutInput{Namespace: ns, Service: "web", Deployment: d}).Get(context.Background(), nil)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an application error, got %v", err)
	assert.Equal(t, "ProgressDeadlineExceeded", appErr.Type())
	assert.Contains(t, appErr.Error(), "web: no progress within 3s")
	assert.Contains(t, appErr.Error(), "has timed out progressing")
}

func TestRolloutWorkflowRejectsBadInputBeforeTouchingTheCluster(t *testing.T) {
	env := testenv.Get(t)
	tq := env.Worker(t)
	ns := testenv.Name(t, "never")
	d := deployment(-1, nil, nil)

	err := startRollout(t, env, tq, api.RolloutInput{Namespace: ns, Service: "web", Deployment: d}).Get(context.Background(), nil)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an application error, got %v", err)
	assert.Equal(t, "InvalidInput", appErr.Type())
	assert.Contains(t, appErr.Error(), "deployment.spec.replicas: -1 is negative")

	_, err = env.Kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing is created for a rejected input, got %v", err)
}

func countEvents(t *testing.T, env *testenv.Env, run client.WorkflowRun, typ enumspb.EventType) int {
	t.Helper()
	it := env.Temporal.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if ev.GetEventType() == typ {
			n++
		}
	}
	return n
}
