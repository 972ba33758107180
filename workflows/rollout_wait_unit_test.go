package workflows

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/deployflow/deployflow/activities"
)

// Issue 22: a rollout's wait for the cluster (pods created, then ready)
// begins in a local activity when its input says WaitLocally, as the lease
// workflow's rollouts do: a change within localWait costs one history event
// (a marker) instead of an activity and the workflow task after it (six).
// A wait with nothing to show by then goes on as an activity, for the rest
// of its time; a rollout started without WaitLocally (before the change,
// or by hand) waits as an activity at once, as it did. This guards both
// paths: before the change every wait was an activity.
func TestARolloutsWaitBeginsInALocalActivityWhenItsInputSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name       string
		local      bool
		readyAfter int // waits before the pods are ready
		wantLocal  int // WaitForChange as a local activity
		wantRemote int // WaitForChange as an activity
	}{
		{"ready within the local wait", true, 1, 1, 0},
		{"nothing by then: an activity for the rest", true, 2, 1, 1},
		{"started without WaitLocally", false, 1, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeReplicaSets()
			var s testsuite.WorkflowTestSuite
			s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
			env := s.NewTestWorkflowEnvironment()
			a := &activities.Activities{}
			env.RegisterActivity(a)
			env.OnActivity(a.PrepareRollout, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.PrepareRolloutInput) (*activities.PrepareRolloutResult, error) {
					return &activities.PrepareRolloutResult{Deployment: in.Deployment, State: f.state()}, nil
				})
			// The ReplicaSet the rollout creates has no pod ready until the
			// cluster has been waited on readyAfter times.
			env.OnActivity(a.ApplyPlan, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.ApplyPlanInput) (*activities.ApplyPlanResult, error) {
					res := f.apply(in)
					for _, rs := range f.rs {
						rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = 0, 0
					}
					res.State = f.state()
					return res, nil
				})
			waits, local, remote := 0, 0, 0
			env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
				if info.ActivityType.Name == "WaitForChange" {
					local++
				}
			})
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				if info.ActivityType.Name == "WaitForChange" {
					remote++
				}
			})
			env.OnActivity(a.WaitForChange, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.WaitForChangeInput) (*activities.RolloutState, error) {
					waits++
					if waits == 1 {
						assert.Equal(t, tc.local, in.Timeout <= localWait, "the first wait's timeout: %s", in.Timeout)
					}
					if waits >= tc.readyAfter {
						for _, rs := range f.rs {
							available(rs)
						}
						f.writes++ // the digest changes with the status
					}
					st := f.state()
					st.Digest = strconv.Itoa(f.writes)
					return &st, nil
				})
			env.OnActivity(a.Notify, mock.Anything, mock.Anything).Return(nil).Maybe()

			in := RolloutInput{Namespace: "lease-wait", Service: "web", Deployment: weekDeployment("nginx:1.27"), WaitLocally: tc.local}
			env.ExecuteWorkflow(RolloutWorkflow, in)
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var res RolloutResult
			require.NoError(t, env.GetWorkflowResult(&res))
			assert.Equal(t, OutcomeComplete, res.Outcome)
			assert.Equal(t, tc.wantLocal, local, "waits in a local activity")
			assert.Equal(t, tc.wantRemote, remote, "waits as an activity")
		})
	}
}
