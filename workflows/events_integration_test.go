package workflows_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// historyOf is the event types of one run of workflow id ("": the latest).
func (dt *deployTest) historyOf(id, runID string) []enumspb.EventType {
	dt.t.Helper()
	it := dt.env.Temporal.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []enumspb.EventType
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(dt.t, err)
		out = append(out, ev.GetEventType())
	}
	return out
}

// Issue 22's history-events target: a first deploy of one service
// started with its manifest (as a Schedule or `temporal workflow start`
// starts one), whose pod is ready at once, writes at most 18 events of its
// own in the lease's deploying run and its rollout (13 + 5: markers,
// search attributes, the child, its timer, the continue-as-new), besides
// its workflow tasks (three events each). The rollout's quick wait sees
// the pod created and ready in the workflow task that created its
// ReplicaSet, so the rollout ends in that task: no WaitForChange activity
// and no second task (1 task + 5 events). Before it, the rollout was 13
// events (19 when it woke for the pod created, then for it ready) and the
// deploy 35 to 41. How many workflow tasks the lease's run takes (3 when
// the child's start and end reach one task each; 4 when the server hands
// them over apart, seen with the rest of the suite beside it) is the
// server's timing, not deployflow's: make bench reports the totals (30 on
// an idle machine). kwok readies a pod well within the quick wait's 2s,
// but a machine loaded by the rest of the suite may not: the test deploys
// up to three leases for one that did not wait in an activity.
func TestAOneServiceFirstDeployWritesAtMostEighteenEventsBesidesItsTasks(t *testing.T) {
	one := int32(1)
	met := false
	for attempt := 1; attempt <= 3 && !met; attempt++ {
		dt := newDeployTest(t)
		m := manifest.Manifest{Lease: dt.lease, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &one,
			Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{dt.lease + ".apps.example.com"}}}}}}}}
		run, err := dt.env.Temporal.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: api.DeployWorkflowID(dt.lease), TaskQueue: dt.tq,
		}, api.DeployWorkflow, api.DeployInput{Manifest: m, Trigger: "test"})
		require.NoError(t, err)
		st := dt.waitRevision(dt.lease, 1)
		require.Equal(t, api.PhaseActive, st.Phase, "last error: %s", st.LastError)

		lease := dt.historyOf(api.DeployWorkflowID(dt.lease), run.GetRunID())
		rollout := dt.historyOf(api.RolloutWorkflowID(manifest.Namespace(dt.lease), "web"), "")
		require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, rollout[len(rollout)-1], "the rollout completed")
		waited := 0
		for _, e := range rollout {
			if e == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
				waited++
			}
		}
		leaseOwn, leaseTasks := ownEvents(lease)
		rolloutOwn, rolloutTasks := ownEvents(rollout)
		t.Logf("attempt %d: %d events (lease run %d: %d own, %d workflow tasks completed; rollout %d: %d own, %d tasks); the rollout waited in %d activities",
			attempt, len(lease)+len(rollout), len(lease), leaseOwn, leaseTasks, len(rollout), rolloutOwn, rolloutTasks, waited)
		// Whatever the machine's load, the quick wait costs at most its one
		// marker more than the activity wait alone did (13 + 1; 19 + 1).
		assert.LessOrEqual(t, len(rollout), 20, "the rollout's events: %v", rollout)
		if waited == 0 {
			met = true
			assert.LessOrEqual(t, leaseOwn+rolloutOwn, 18, "lease run %v\nrollout %v", lease, rollout)
			assert.Equal(t, 1, rolloutTasks, "the rollout ends in its first workflow task: %v", rollout)
		}
	}
	assert.True(t, met, "in three deploys, every rollout waited for its pod in an activity: the quick wait never saw it ready")
}

// ownEvents counts a history's events other than its workflow tasks'
// (scheduled, started, completed, failed, timed out), and its workflow
// tasks that completed (one the worker did not start in time, a machine's
// load, is tried again).
func ownEvents(h []enumspb.EventType) (own, tasks int) {
	for _, e := range h {
		switch e {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			tasks++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
			enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
		default:
			own++
		}
	}
	return own, tasks
}
