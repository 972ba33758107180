package workflows_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// leaseUpdate sends update name with arg to the lease's workflow, as the
// CLI does, and returns the lease's status or the refusal.
func (dt *deployTest) leaseUpdate(name string, arg any) (api.DeployStatus, error) {
	opts := client.UpdateWorkflowOptions{WorkflowID: api.DeployWorkflowID(dt.lease), UpdateName: name, WaitForStage: client.WorkflowUpdateStageCompleted}
	if arg != nil {
		opts.Args = []any{arg}
	}
	var st api.DeployStatus
	h, err := dt.env.Temporal.UpdateWorkflow(context.Background(), opts)
	if err == nil {
		err = h.Get(context.Background(), &st)
	}
	return st, err
}

// Issue 37.4: `deployflow rollback` after a successful deploy returns
// every service to the deploy before it, as `kubectl rollout undo` does:
// each service's ReplicaSet of that deploy is scaled back up and no
// ReplicaSet is made; the deploy is recorded as a rollback, and its tree
// says so. A rejected deploy is then refused by a rollback, a retry, a
// restart and a schedule's redeploy, each with the reason. Before, after a
// successful deploy the only way back was to send the old manifest again.
func TestARollbackReturnsToTheDeployBeforeAndARejectedDeployIsRefused(t *testing.T) {
	dt := newDeployTest(t)
	ns := manifest.Namespace(dt.lease)
	two, one := int32(2), int32(1)
	app := func(web, worker string) manifest.Manifest {
		return manifest.Manifest{Lease: dt.lease, Services: []manifest.Service{
			{Name: "web", Image: web, Replicas: &two, Ports: []manifest.Port{{Port: 80}}},
			{Name: "worker", Image: worker, Replicas: &one},
		}}
	}
	dt.deploy(app("nginx:1.26", "redis:7.2"))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase)
	dt.deploy(app("nginx:1.27", "redis:7.4"))
	st := dt.waitRevision(dt.lease, 2)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, []int64{1}, st.RollbackTargets)

	replicaSets := func() map[string]string { // name -> image
		rss, err := dt.env.Kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		out := map[string]string{}
		for _, rs := range rss.Items {
			out[rs.Name] = rs.Spec.Template.Spec.Containers[0].Image
		}
		return out
	}
	before := replicaSets()
	require.Len(t, before, 4, "two revisions of two services")

	_, err := dt.leaseUpdate(api.UpdateRollback, api.RollbackRequest{})
	require.NoError(t, err)
	st = dt.waitRevision(dt.lease, 3)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	rec := st.History[len(st.History)-1]
	assert.Equal(t, "rollback", rec.Trigger)
	assert.Equal(t, int64(1), rec.RollbackTo)
	require.NotNil(t, rec.Tree)
	assert.Equal(t, "roll back lease "+dt.lease+" to deploy #1", rec.Tree.Text)
	assert.Equal(t, map[string]string{"web": "nginx:1.26", "worker": "redis:7.2"}, rec.Image)
	assert.Equal(t, before, replicaSets(), "no ReplicaSet was made: the old ones were scaled back up")
	for svc, want := range map[string]int32{"web": two, "worker": one} {
		testenv.Eventually(t, time.Minute, pollQuery, svc+" never returned to its first deploy", func() (bool, string) {
			desired, available, images := dt.available(ns, svc)
			old := map[string]string{"web": "nginx:1.26", "worker": "redis:7.2"}[svc]
			return desired == want && available == want && images[old] == want, fmt.Sprintf("desired %d, available %d, %v", desired, available, images)
		})
	}

	// A deploy the lease never had cannot be rejected (typed by hand).
	_, err = dt.leaseUpdate(api.UpdateReject, api.RejectRequest{Revision: 99})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "revision: 99: lease "+dt.lease+" has deploys #1 to #3 (deployflow history)")

	// Deploy #2 rejected: a rollback to it is refused, and it is marked in
	// the history.
	st, err = dt.leaseUpdate(api.UpdateReject, api.RejectRequest{Revision: 2})
	require.NoError(t, err)
	assert.Equal(t, []int64{2}, st.Rejected)
	assert.True(t, st.History[slices.IndexFunc(st.History, func(r api.DeployRecord) bool { return r.Revision == 2 })].Rejected)
	_, err = dt.leaseUpdate(api.UpdateRollback, api.RollbackRequest{To: 2})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "deploy #2 of lease "+dt.lease+" was rejected (deployflow reject): a rollback does not deploy it again")

	// A deploy that fails, then rejected: its retry is refused.
	bad := app("nginx:1.28", "redis:7.2")
	deadline := int32(5)
	bad.Services[0].PodLabels = map[string]string{"deployflow.dev/never-ready": "true"}
	bad.Services[0].Rollout = &manifest.Rollout{ProgressDeadlineSeconds: &deadline}
	dt.deploy(bad)
	require.Equal(t, api.PhaseFailed, dt.waitRevision(dt.lease, 4).Phase)
	_, err = dt.leaseUpdate(api.UpdateReject, api.RejectRequest{Revision: 4})
	require.NoError(t, err)
	_, err = dt.leaseUpdate(api.UpdateRetry, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "deploy #4 of lease "+dt.lease+" was rejected (deployflow reject): a retry does not deploy it again")

	// The version running (deploy #3) rejected: a restart is refused, and
	// so is a schedule's redeploy (a signal: the refusal is in the status).
	_, err = dt.leaseUpdate(api.UpdateReject, api.RejectRequest{Revision: 3})
	require.NoError(t, err)
	_, err = dt.leaseUpdate(api.UpdateRestart, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "deploy #3 of lease "+dt.lease+" was rejected (deployflow reject): a restart does not deploy it again")
	require.NoError(t, dt.env.Temporal.SignalWorkflow(context.Background(), api.DeployWorkflowID(dt.lease), "", api.SignalRedeploy,
		api.RedeployRequest{Action: api.RedeployReapply, Trigger: "schedule"}))
	testenv.Eventually(t, 2*time.Minute, pollQuery, "the schedule's redeploy was never refused", func() (bool, string) {
		st, err = dt.status(dt.lease)
		return err == nil && len(st.Refusals) == 1, fmt.Sprintf("%+v %v", st.Refusals, err)
	})
	assert.Equal(t, "schedule", st.Refusals[0].Trigger)
	assert.Contains(t, st.Refusals[0].Error, "deploy #3 of lease "+dt.lease+" was rejected (deployflow reject): a reapply (schedule) does not deploy it again")
	assert.Equal(t, int64(4), st.Revision, "nothing was deployed")
	assert.Equal(t, []int64{2, 3, 4}, st.Rejected)
}
