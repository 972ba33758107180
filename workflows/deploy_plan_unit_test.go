package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/plan"
)

// Issue 21.3: the deploy marks its plan's nodes by what they do and to
// what (operation and target), never by their words. A plan worded
// otherwise (an older worker's, or after a release rewords an operation)
// is executed node for node, nothing added as "not in the plan". Before,
// the chain matched what it ran to the plan's nodes by text: each
// reworded node was left skipped and its operation added again.
func TestTheExecutedTreeDoesNotDependOnTheWording(t *testing.T) {
	m := oneService("l")
	objects := []string{"Ingress/lease-ingress", "Service/web"}
	web := activities.Classification{Service: "web", Class: activities.ChangeRollout, DesiredImage: "nginx:1.27", DesiredReplicas: 1}
	planned := activities.Tree(&activities.DeployPlan{Lease: "l", ReserveHostnames: []string{"web.example.com"}, Objects: objects,
		Services: []activities.Classification{web}}, &m)
	planned.Walk(func(n *plan.Node, _ int) { n.Text = "in other words, " + n.Text })
	nodes := 0
	planned.Walk(func(*plan.Node, int) { nodes++ })

	env := newDeployEnv(t, func(env *deployEnv) {
		env.OnActivity(env.a.PrepareDeploy, mock.Anything, mock.Anything).Return(&activities.PrepareDeployResult{
			Lease: activities.LeaseInfo{ID: "l", Owner: "acme", State: "Active"},
			Plan:  activities.DeployPlan{Lease: "l", Fingerprint: "fp1", ReserveHostnames: []string{"web.example.com"}, Objects: objects, Tree: planned}}, nil)
		env.OnActivity(env.a.ApplyDeploy, mock.Anything, mock.Anything).Return(&activities.ApplyDeployResult{
			IPs:       map[string]string{},
			Hostnames: &activities.HostnamesResult{Reserved: []string{"web.example.com"}},
			Applied:   &activities.ApplyObjectsResult{Changed: objects, Kept: objects},
			Classes:   []activities.Classification{web},
		}, nil)
		env.rollouts(RolloutResult{Outcome: OutcomeComplete, DesiredReplicas: 1}, nil)
	})
	env.ExecuteWorkflow(DeployWorkflow, DeployInput{Manifest: m, Trigger: "test"})
	require.True(t, env.IsWorkflowCompleted())
	in := continuedWith(t, env.GetWorkflowError())
	require.NotEmpty(t, in.Carry.History)
	executed := in.Carry.History[len(in.Carry.History)-1].Tree
	require.NotNil(t, executed)
	got := 0
	executed.Walk(func(n *plan.Node, _ int) {
		got++
		assert.NotContains(t, n.Text, notInPlan)
		assert.Equal(t, plan.Done, n.State, "%s: %s", n.Text, n.Error)
	})
	assert.Equal(t, nodes, got, "the executed tree is the planned one, node for node:\n%s", executed)
}
