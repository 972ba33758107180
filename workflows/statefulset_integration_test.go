package workflows_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/statefulset"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 39.2's driver against the stack's own StatefulSet controller:
// ApplyStatefulSet, ReadStatefulSet and SetPartition, stepped by
// statefulset.Next as the stateful rollout will step them. A new
// StatefulSet comes up with a Bound claim per pod; a new image is applied
// with the partition holding every pod, so nothing is replaced until the
// steps lower it; then the pods move to the new revision one at a time
// from the highest ordinal down, and every claim is the one it was, bound
// to the same volume.
func TestAStatefulSetRollsOutByPartitionFromTheHighestOrdinal(t *testing.T) {
	env := testenv.Get(t)
	acts := env.Activities()
	ctx := context.Background()
	lease := testenv.ShortName("sts")
	ns := manifest.Namespace(lease)
	_, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	three := int32(3)
	app := func(image string) activities.ApplyStatefulSetInput {
		m := manifest.Manifest{Lease: lease, Services: []manifest.Service{{Name: "db", Image: image, Replicas: &three,
			Ports:   []manifest.Port{{Port: 5432}},
			Volumes: []manifest.Volume{{Name: "data", Size: "1Gi", MountPath: "/var/lib/postgresql/data", Persistent: true, Class: devstack.StorageClass}}}}}
		sts, err := m.WithDefaults().StatefulSet("db")
		require.NoError(t, err)
		return activities.ApplyStatefulSetInput{StatefulSet: *sts}
	}
	ref := activities.StatefulSetRef{Namespace: ns, Name: "db"}
	// rollOut steps the partition down to 0 and returns, for each ordinal,
	// the order in which it came to run the update revision.
	rollOut := func() map[int32]int {
		became := map[int32]int{}
		testenv.Eventually(t, 2*time.Minute, 100*time.Millisecond, "the rollout never completed", func() (bool, string) {
			st, err := acts.ReadStatefulSet(ctx, ref)
			if err != nil || st.Stale {
				return false, fmt.Sprint(err)
			}
			for _, p := range st.Pods {
				if _, seen := became[p.Ordinal]; !seen && p.Revision == st.UpdateRevision && !p.Terminating {
					became[p.Ordinal] = len(became)
				}
			}
			step := statefulset.Next(st.Observed, 0, 1)
			if step.Partition != st.Partition {
				require.NoError(t, acts.SetPartition(ctx, activities.SetPartitionInput{StatefulSetRef: ref, Partition: step.Partition}))
			}
			return step.Reached && step.Partition == st.Partition, step.Waiting
		})
		return became
	}
	claims := func() map[string]string {
		st, err := acts.ReadStatefulSet(ctx, ref)
		require.NoError(t, err)
		return st.Claims
	}

	st, err := acts.ApplyStatefulSet(ctx, app("postgres:16"))
	require.NoError(t, err)
	assert.Equal(t, int32(3), st.Partition, "created holding every ordinal")
	rollOut()
	var before map[string]string
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the claims were never all Bound", func() (bool, string) {
		before = claims()
		bound := 0
		for _, vol := range before {
			if vol != "" {
				bound++
			}
		}
		return bound == 3, fmt.Sprint(before)
	})
	assert.ElementsMatch(t, []string{"data-db-0", "data-db-1", "data-db-2"}, slices.Collect(maps.Keys(before)))

	// The new image: applied holding every pod, nothing replaced.
	st, err = acts.ApplyStatefulSet(ctx, app("postgres:17"))
	require.NoError(t, err)
	assert.Equal(t, int32(3), st.Partition)
	again, err := acts.ApplyStatefulSet(ctx, app("postgres:17"))
	require.NoError(t, err)
	assert.Equal(t, int32(3), again.Partition, "applied again (a retry), it changes nothing")
	time.Sleep(2 * time.Second)
	st, err = acts.ReadStatefulSet(ctx, ref)
	require.NoError(t, err)
	for _, p := range st.Pods {
		assert.Equal(t, st.CurrentRevision, p.Revision, "db-%d is not replaced while the partition holds it", p.Ordinal)
	}

	became := rollOut()
	assert.Equal(t, map[int32]int{2: 0, 1: 1, 0: 2}, became, "replaced from the highest ordinal down, one at a time")
	assert.Equal(t, before, claims(), "every claim is the one it was, bound to the same volume")

	// Applied once more after the rollout (a retry of its apply): the
	// partition stays at 0.
	st, err = acts.ApplyStatefulSet(ctx, app("postgres:17"))
	require.NoError(t, err)
	assert.Equal(t, int32(0), st.Partition)
}

// statefulParent stands in for a lease's workflow (issue 39.2, until the
// lease's chain starts stateful rollouts): started under the lease's
// workflow ID on a task queue of its own, it runs StatefulSetRolloutWorkflow
// as its child on the real worker's queue, as the lease's chain will.
func statefulParent(ctx workflow.Context, tq string, in api.StatefulSetRolloutInput) (*api.RolloutResult, error) {
	ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: api.RolloutWorkflowID(in.Namespace, in.Service), TaskQueue: tq})
	var res api.RolloutResult
	err := workflow.ExecuteChildWorkflow(ctx, api.StatefulSetRolloutWorkflow, in).Get(ctx, &res)
	return &res, err
}

// The stateful rollout as a workflow on the stack's StatefulSet
// controller: a two-replica service comes up with two bound claims; an
// image update replaces db-1 then db-0, each claim the one it was; a
// canary at one pod whose analysis fails returns that pod to the previous
// revision; an abort with every ordinal updated returns them all; a version whose pods never turn Ready fails at the
// progress deadline and autoRollback returns every ordinal to the
// previous revision (deleting the stuck pod itself); and a start by hand,
// with no lease's workflow above it, is refused before anything is
// written. After each step, every claim is the one it was, bound to the
// same volume.
func TestAStatefulRolloutStepsThePartitionAbortsAndRollsBackKeepingEveryClaim(t *testing.T) {
	env := testenv.Get(t)
	tq := env.Worker(t)
	parentTQ := testenv.Name(t, "parent")
	pw := worker.New(env.Temporal, parentTQ, worker.Options{WorkerStopTimeout: time.Second})
	pw.RegisterWorkflowWithOptions(statefulParent, workflow.RegisterOptions{Name: "StatefulParent"})
	require.NoError(t, pw.Start())
	t.Cleanup(pw.Stop)

	acts := env.Activities()
	ctx := context.Background()
	lease := testenv.ShortName("stsw")
	ns := manifest.Namespace(lease)
	_, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	ref := activities.StatefulSetRef{Namespace: ns, Name: "db"}
	rolloutID := api.RolloutWorkflowID(ns, "db")

	two := int32(2)
	input := func(image string, never bool, steps ...manifest.CanaryStep) api.StatefulSetRolloutInput {
		// Ready a second after start: each step lasts long enough for the
		// order of replacement to be seen (kwok's pods are Ready at once,
		// and a whole rollout took 0.4 s).
		svc := manifest.Service{Name: "db", Image: image, Replicas: &two, Ports: []manifest.Port{{Port: 5432}},
			PodAnnotations: map[string]string{"deployflow.dev/ready-after": "1s"},
			Volumes:        []manifest.Volume{{Name: "data", Size: "1Gi", MountPath: "/var/lib/postgresql/data", Persistent: true, Class: devstack.StorageClass}}}
		// The progress deadline: a minute, where no step should reach it
		// (8s for every step, as before, failed a canary's return in CI,
		// "no progress within 8s (waiting for db-1 to be created)", with
		// the rest of the suite beside it); 30s for the version that never
		// turns Ready, which must reach it, and whose return the same
		// deadline bounds.
		deadline := int32(60)
		if never {
			svc.PodLabels = map[string]string{"deployflow.dev/never-ready": "true"}
			deadline = 30
		}
		m := manifest.Manifest{Lease: lease, Services: []manifest.Service{svc}}
		sts, err := m.WithDefaults().StatefulSet("db")
		require.NoError(t, err)
		return api.StatefulSetRolloutInput{Namespace: ns, Service: "db", StatefulSet: *sts, Steps: steps,
			ProgressDeadlineSeconds: deadline, AutoRollback: true}
	}
	start := func(in api.StatefulSetRolloutInput) client.WorkflowRun {
		run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: api.DeployWorkflowID(lease), TaskQueue: parentTQ}, "StatefulParent", tq, in)
		require.NoError(t, err)
		return run
	}
	read := func() *activities.StatefulSetState {
		st, err := acts.ReadStatefulSet(ctx, ref)
		require.NoError(t, err)
		return st
	}
	revisions := func(st *activities.StatefulSetState) map[int32]string {
		out := map[int32]string{}
		for _, p := range st.Pods {
			out[p.Ordinal] = p.Revision
		}
		return out
	}

	// 1. Two replicas, two bound claims.
	require.NoError(t, start(input("postgres:16", false)).Get(ctx, nil))
	var claims map[string]string
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the claims were never both Bound", func() (bool, string) {
		claims = read().Claims
		return len(claims) == 2 && claims["data-db-0"] != "" && claims["data-db-1"] != "", fmt.Sprint(claims)
	})
	v1 := read().UpdateRevision

	// 2. An image update: db-1, then db-0, each with its claim.
	run := start(input("postgres:17", false))
	var order []int32
	for done := false; !done; {
		st := read()
		for _, p := range st.Pods {
			if p.Revision == st.UpdateRevision && p.Revision != v1 && !p.Terminating && !slices.Contains(order, p.Ordinal) {
				order = append(order, p.Ordinal)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		d, err := env.Temporal.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		require.NoError(t, err)
		done = d.GetWorkflowExecutionInfo().GetCloseTime() != nil
	}
	require.NoError(t, run.Get(ctx, nil))
	st := read()
	v2 := st.UpdateRevision
	assert.NotEqual(t, v1, v2)
	assert.Equal(t, []int32{1, 0}, order, "replaced from the highest ordinal down")
	assert.Equal(t, map[int32]string{0: v2, 1: v2}, revisions(st))
	assert.Equal(t, int32(0), st.Partition)
	assert.Equal(t, claims, st.Claims, "every claim is the one it was, bound to the same volume")

	// 3. A canary at one pod whose analysis fails (its Job exits 3): db-1
	// returns to v2 with its claim.
	fifty, hundred := int32(50), int32(100)
	failing := manifest.CanaryStep{Analysis: &manifest.Analysis{Job: &manifest.JobCheck{Image: "ghcr.io/acme/smoke:1",
		PodAnnotations: map[string]string{"deployflow.dev/exit-code": "3"}}}} // the local stack's pods exit with it
	run = start(input("postgres:18", false, manifest.CanaryStep{SetWeight: &fifty}, failing))
	var canaries []int32 // ordinals seen on the canary's revision
	for done := false; !done; {
		st := read()
		for _, p := range st.Pods {
			if p.Revision != v1 && p.Revision != v2 && !slices.Contains(canaries, p.Ordinal) {
				canaries = append(canaries, p.Ordinal)
			}
		}
		time.Sleep(100 * time.Millisecond)
		d, err := env.Temporal.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		require.NoError(t, err)
		done = d.GetWorkflowExecutionInfo().GetCloseTime() != nil
	}
	assert.Equal(t, []int32{1}, canaries, "the canary is db-1 alone; db-0 stays below the partition")
	err = run.Get(ctx, nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, api.ErrRolloutAborted, appErr.Type(), "%v", err)
	assert.Contains(t, err.Error(), "analysis failed")
	assert.Contains(t, err.Error(), "every ordinal runs revision "+v2+" again")
	st = read()
	assert.Equal(t, map[int32]string{0: v2, 1: v2}, revisions(st), "db-1 runs the previous revision again")
	assert.Equal(t, claims, st.Claims, "the canary's pod came back with its claim")

	// 3b. An abort mid-rollout, every ordinal updated (setWeight 100,
	// then a pause): both return to v2, each with its claim.
	var status api.RolloutStatus
	run = start(input("postgres:18", false, manifest.CanaryStep{SetWeight: &hundred}, manifest.CanaryStep{Pause: &manifest.Pause{}}))
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the rollout never reached its pause with every ordinal updated", func() (bool, string) {
		v, err := env.Patient().QueryWorkflow(ctx, rolloutID, "", api.QueryStatus)
		if err != nil || v.Get(&status) != nil {
			return false, fmt.Sprint(err)
		}
		// (Until the new run starts, the query answers from the last one.)
		return status.Canary != nil && status.Canary.Step == 2 && status.UpdatedReplicas == 2 && status.StatefulSet.UpdateRevision != v2,
			fmt.Sprintf("%+v %+v", status.Canary, status.StatefulSet)
	})
	assert.NotContains(t, slices.Collect(maps.Values(revisions(read()))), v2, "every ordinal runs the update")
	require.NoError(t, env.Update(ctx, client.UpdateWorkflowOptions{WorkflowID: rolloutID, UpdateName: api.UpdateAbort, WaitForStage: client.WorkflowUpdateStageCompleted}, nil))
	err = run.Get(ctx, nil)
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, api.ErrRolloutAborted, appErr.Type(), "%v", err)
	st = read()
	assert.Equal(t, map[int32]string{0: v2, 1: v2}, revisions(st), "every updated ordinal runs the previous revision again")
	assert.Equal(t, claims, st.Claims, "each pod came back with its claim")

	// 4. A version that never turns Ready: at the deadline, autoRollback
	// deletes the stuck db-1 and returns it to v2.
	err = start(input("postgres:19", true)).Get(ctx, nil)
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, api.ErrProgressDeadlineExceeded, appErr.Type(), "%v", err)
	assert.Contains(t, err.Error(), "every ordinal runs revision "+v2+" again")
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the pods never all ran v2 and Ready", func() (bool, string) {
		st = read()
		ready := 0
		for _, p := range st.Pods {
			if p.Ready && p.Revision == v2 {
				ready++
			}
		}
		return ready == 2, fmt.Sprintf("%+v", st.Pods)
	})
	assert.Equal(t, claims, st.Claims, "the stuck pod's claim is the one it was")

	// 5. Started by hand, with no lease's workflow above it: refused.
	hand, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: rolloutID, TaskQueue: tq}, api.StatefulSetRolloutWorkflow, input("postgres:20", false))
	require.NoError(t, err)
	err = hand.Get(ctx, nil)
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, api.ErrInvalidInput, appErr.Type())
	assert.Contains(t, err.Error(), "started by its lease's workflow")
	assert.Equal(t, v2, read().UpdateRevision, "nothing was written")
}
