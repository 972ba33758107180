package rollout

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
)

// Guards a restart's time: it is recorded (a 1 ms timer ends the workflow
// task) before the ReplicaSet it stamps is created. Before, the restart
// stamped workflow.Now and the sync created the ReplicaSet in the same
// task; a task that failed after the create was taken again a second
// later, stamped another time and created a second ReplicaSet
// (TestRestartRollsANewRevision saw revision 3 in CI run 45).
func TestARestartsTimeIsRecordedBeforeItsReplicaSetIsCreated(t *testing.T) {
	cluster := newFakeReplicaSets()
	cluster.neverAvailable = []string{"nginx:1.27"} // the rollout waits: the restart meets it running
	env, _ := cluster.env(t, time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC), "")
	var seq []string
	restarted := false
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		if restarted {
			seq = append(seq, fmt.Sprintf("timer %s", d))
		}
	})
	env.SetOnLocalActivityStartedListener(func(_ *activity.Info, _ context.Context, args []any) {
		if in, ok := args[0].(activities.ApplyPlanInput); ok && in.Create != nil {
			if at := in.Create.Spec.Template.Annotations[api.RestartedAtAnnotation]; at != "" {
				seq = append(seq, "create the restarted ReplicaSet")
			}
		}
	})
	env.RegisterDelayedCallback(func() {
		restarted = true
		env.UpdateWorkflow(api.UpdateRestart, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("restart refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		})
	}, 30*time.Second)
	env.ExecuteWorkflow(RolloutWorkflow, api.RolloutInput{Namespace: "lease-r", Service: "web", Deployment: weekDeployment("nginx:1.27")})
	require.True(t, env.IsWorkflowCompleted())
	require.Contains(t, seq, "create the restarted ReplicaSet")
	assert.Equal(t, "timer 1ms", seq[0], "the restart's time is recorded before its ReplicaSet is created: %v", seq)
}
