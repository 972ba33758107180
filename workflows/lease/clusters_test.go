package lease

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/wftest"
)

// Issue 23.1: a lease workflow whose cluster, ID and task queue disagree
// would deploy the lease where its input does not say; it is refused
// before any activity runs, naming the field and the fix. The default
// cluster's workflows (no cluster, no @ in the queue) are today's.
func TestALeaseWorkflowRunsOnlyWhereItsClusterSays(t *testing.T) {
	placed := oneService("shop")
	placed.Placement = &manifest.Placement{Waves: []manifest.Wave{{Clusters: []string{"eu-1"}}}}
	for _, c := range []struct {
		name, id, queue, cluster string
		m                        manifest.Manifest
		want                     string
	}{
		{"the default cluster's input under a cluster's ID", "deploy-shop@eu-1", "deployflow", "", oneService("shop"), `cluster: empty, but workflow deploy-shop@eu-1 deploys to cluster eu-1: set "cluster": "eu-1" and start it on that cluster's task queue`},
		{"a cluster's input under the default cluster's ID", "deploy-shop", "deployflow@eu-1", "eu-1", oneService("shop"), "cluster: lease shop's deploys to cluster eu-1 run as workflow deploy-shop@eu-1, not deploy-shop"},
		{"a cluster's input on another cluster's queue", "deploy-shop@eu-1", "deployflow@us-1", "eu-1", oneService("shop"), "run on task queue <worker's task queue>@eu-1 (the worker's --clusters), not deployflow@us-1"},
		{"a cluster's input on the worker's own queue", "deploy-shop@eu-1", "deployflow", "eu-1", oneService("shop"), "not deployflow"},
		{"a bad cluster name", "deploy-shop@EU", "deployflow@EU", "EU", oneService("shop"), `cluster: cluster name "EU"`},
		{"a manifest with a placement", "deploy-shop", "deployflow", "", placed, "manifest.placement: a lease's workflow deploys to one cluster"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := wftest.NewEnv(&s)
			env.RegisterActivity(&activities.Activities{}) // none may run: unmocked, any would fail the test differently
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: c.id, TaskQueue: c.queue})
			env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: c.m, Cluster: c.cluster})
			err := env.GetWorkflowError()
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			assert.Contains(t, []string{api.ErrInvalidInput, api.ErrInvalidManifest}, appErr.Type())
			assert.Contains(t, appErr.Error(), c.want)
		})
	}
}
