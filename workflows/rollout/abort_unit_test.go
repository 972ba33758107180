package rollout

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// revisionOneReadOnePodShort rolls revision 1 (nginx:1.26, four replicas)
// out on a fake cluster and returns the environment of the next rollout:
// its pods (nginx:1.27) never become available, and its first read finds
// revision 1 three of four available (a ReplicaSet controller behind its
// pods).
func revisionOneReadOnePodShort(t *testing.T) (*fakeReplicaSets, *testsuite.TestWorkflowEnvironment, api.RolloutResult) {
	cluster := newFakeReplicaSets()
	env, _ := cluster.env(t, time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC), "")
	env.ExecuteWorkflow(RolloutWorkflow, api.RolloutInput{Namespace: "lease-late", Service: "web", Deployment: weekDeployment("nginx:1.26")})
	require.NoError(t, env.GetWorkflowError())
	var v1 api.RolloutResult
	require.NoError(t, env.GetWorkflowResult(&v1))
	require.Equal(t, api.OutcomeComplete, v1.Outcome)

	cluster.neverAvailable = []string{"nginx:1.27"}
	cluster.staleOnce = map[string]int32{v1.NewReplicaSet: 3}
	env, _ = cluster.env(t, env.Now(), "")
	return cluster, env, v1
}

// Guards the abort of a rollout whose start read the last-known-good
// ReplicaSet one pod short: its status lagged its pods (the ReplicaSet
// controller behind, on a loaded machine). Before, the rollout fixed "no
// stable revision" at its start and refused every abort until it ended
// ("there is no other fully available revision to go back to"), though
// revision 1 was up all along: TestUndoReusesTheOldReplicaSet failed so in
// CI. Now the abort reads again what is fully available, and returns to it.
func TestAnAbortReturnsToAStableRevisionTheStartReadOnePodShort(t *testing.T) {
	cluster, env, v1 := revisionOneReadOnePodShort(t)
	accepted := false
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdateAbort, "", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("abort refused: %v", err) },
			OnAccept:   func() { accepted = true },
			OnComplete: func(any, error) {},
		})
	}, 2*time.Minute)
	env.ExecuteWorkflow(RolloutWorkflow, api.RolloutInput{Namespace: "lease-late", Service: "web", Deployment: weekDeployment("nginx:1.27")})

	require.True(t, accepted, "the abort was accepted")
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(env.GetWorkflowError(), &appErr), "got %v", env.GetWorkflowError())
	assert.Equal(t, api.ErrRolloutAborted, appErr.Type())
	for name, rs := range cluster.rs {
		rev, _ := rollout.Revision(rs)
		if name == v1.NewReplicaSet {
			assert.Equal(t, int32(4), rs.Status.AvailableReplicas, "revision 1 is fully available again")
			assert.Equal(t, int64(3), rev, "revision 1 came back as the newest revision")
			continue
		}
		assert.Equal(t, int32(0), *rs.Spec.Replicas, "%s (revision %d) scaled away", name, rev)
	}
	assert.Len(t, cluster.rs, 2, "the abort created no ReplicaSet")
}

// Guards autoRollback at the progress deadline of a rollout whose start
// read the last-known-good ReplicaSet one pod short (its status behind its
// pods). Before, the rollout fixed "no stable revision" at its start and,
// at the deadline, failed with ProgressDeadlineExceeded leaving the broken
// revision half rolled out: TestProgressDeadlineWithAutoRollbackRestores
// TheStableRevision failed so in CI. Now the deadline reads again what is
// fully available, and rolls back to it.
func TestAutoRollbackReturnsToAStableRevisionTheStartReadOnePodShort(t *testing.T) {
	cluster, env, v1 := revisionOneReadOnePodShort(t)
	broken := weekDeployment("nginx:1.27")
	deadline := int32(120)
	broken.Spec.ProgressDeadlineSeconds = &deadline
	env.ExecuteWorkflow(RolloutWorkflow, api.RolloutInput{Namespace: "lease-late", Service: "web", Deployment: broken, AutoRollback: true})

	var appErr *temporal.ApplicationError
	require.True(t, errors.As(env.GetWorkflowError(), &appErr), "got %v", env.GetWorkflowError())
	assert.Equal(t, api.ErrProgressDeadlineExceeded, appErr.Type())
	assert.Contains(t, appErr.Error(), "rolled back to revision 1")
	var res api.RolloutResult
	require.NoError(t, appErr.Details(&res))
	assert.Equal(t, api.OutcomeRolledBack, res.Outcome)
	for name, rs := range cluster.rs {
		if name == v1.NewReplicaSet {
			assert.Equal(t, int32(4), rs.Status.AvailableReplicas, "revision 1 is fully available again")
			continue
		}
		assert.Equal(t, int32(0), *rs.Spec.Replicas, "the broken revision %s is scaled to 0", name)
	}
}

// Guards what a user reads when autoRollback's return itself times out:
// the stable revision, scaled back up, does not come up within the
// deadline. Before, the failure read "no progress within 120s: ReplicaSet
// <stable> has timed out progressing", as if the failed revision had never
// been left, though it was scaled to 0 (CI saw this on a loaded machine,
// where the stable revision's fourth pod took longer than the live test's
// 4 s deadline, and took it for a rollback that never happened). Now it
// says the rollout rolled back, to which revision, and how much of it is
// available.
func TestARollbackThatTimesOutSaysItRolledBack(t *testing.T) {
	cluster := newFakeReplicaSets()
	env, _ := cluster.env(t, time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC), "")
	env.ExecuteWorkflow(RolloutWorkflow, api.RolloutInput{Namespace: "lease-slow", Service: "web", Deployment: weekDeployment("nginx:1.26")})
	require.NoError(t, env.GetWorkflowError())

	// From now on no pod of either revision becomes available: the stable
	// one's return cannot make progress either.
	cluster.neverAvailable = []string{"nginx:1.26", "nginx:1.27"}
	env, _ = cluster.env(t, env.Now(), "")
	broken := weekDeployment("nginx:1.27")
	deadline := int32(120)
	broken.Spec.ProgressDeadlineSeconds = &deadline
	env.ExecuteWorkflow(RolloutWorkflow, api.RolloutInput{Namespace: "lease-slow", Service: "web", Deployment: broken, AutoRollback: true})

	var appErr *temporal.ApplicationError
	require.True(t, errors.As(env.GetWorkflowError(), &appErr), "got %v", env.GetWorkflowError())
	assert.Equal(t, api.ErrProgressDeadlineExceeded, appErr.Type())
	assert.Contains(t, appErr.Error(), "web: rolled back to revision 1, which made no progress within 120s (")
	assert.Contains(t, appErr.Error(), " of 4 available)")
	var res api.RolloutResult
	require.NoError(t, appErr.Details(&res))
	assert.Equal(t, api.OutcomeRolledBack, res.Outcome)
	assert.Equal(t, int64(3), res.Revision, "revision 1 came back as the newest revision")
}

// Issue 35.2: a rollout's scale update is held to the operator's bound on
// the lease's replicas (--max-replicas, less its other services'), which
// its lease workflow hands it; before, it took 500 replicas where the
// operator allowed 64 (only manifest.MaxReplicas, 1000, bounded it).
func TestARolloutsScaleIsHeldToTheOperatorsReplicaBound(t *testing.T) {
	cluster, env, _ := revisionOneReadOnePodShort(t)
	var refused []error
	accepted := 0
	send := func(name string, arg any, at time.Duration) {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { refused = append(refused, err) },
				OnAccept:   func() { accepted++ },
				OnComplete: func(any, error) {},
			}, arg)
		}, at)
	}
	send(api.UpdateScale, api.ScaleRequest{Replicas: 500}, time.Minute)
	send(api.UpdateScale, api.ScaleRequest{Replicas: 60}, 2*time.Minute)
	env.ExecuteWorkflow(RolloutWorkflow, api.RolloutInput{Namespace: "lease-late", Service: "web", Deployment: weekDeployment("nginx:1.27"), MaxReplicas: 60})

	require.Len(t, refused, 1, "the scale to 500 was refused, and only it: %v", refused)
	assert.Contains(t, refused[0].Error(), "replicas: 500: this provider allows this service at most 60 (the operator's --max-replicas for the lease, less its other services' replicas)")
	assert.Equal(t, 1, accepted, "the scale to 60 was taken")
	for _, rs := range cluster.rs {
		assert.LessOrEqual(t, *rs.Spec.Replicas, int32(60), rs.Name)
	}
}
