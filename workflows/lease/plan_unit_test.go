package lease

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
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
			Plan:  activities.DeployPlan{Lease: "l", Fingerprint: "0123456789abcdef", ReserveHostnames: []string{"web.example.com"}, Objects: objects, Tree: planned}}, nil)
		env.OnActivity(env.a.ApplyDeploy, mock.Anything, mock.Anything).Return(&activities.ApplyDeployResult{
			IPs:       map[string]string{},
			Hostnames: &activities.HostnamesResult{Reserved: []string{"web.example.com"}},
			Applied:   &activities.ApplyObjectsResult{Changed: objects, Kept: objects},
			Classes:   []activities.Classification{web},
		}, nil)
		env.rollouts(api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil)
	})
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: m, Trigger: "test"})
	require.True(t, env.IsWorkflowCompleted())
	in := continuedWith(t, env.GetWorkflowError())
	require.NotEmpty(t, deployed(in).Carry.History)
	executed := deployed(in).Carry.History[len(deployed(in).Carry.History)-1].Tree
	require.NotNil(t, executed)
	got := 0
	executed.Walk(func(n *plan.Node, _ int) {
		got++
		assert.NotContains(t, n.Text, notInPlan)
		assert.Equal(t, plan.Done, n.State, "%s: %s", n.Text, n.Error)
	})
	assert.Equal(t, nodes, got, "the executed tree is the planned one, node for node:\n%s", executed)
}

// Found by make test with the live tests side by side: a deploy's
// executed operations lacked the hostname and IP it released (and could
// lack the objects it applied). A local activity run in a workflow task
// that then fails (a signal arriving meanwhile: UnhandledCommand) runs
// again in the next task and finds its work done: nothing left to apply
// or release. What the plan said is recorded as done once the step
// succeeded, with anything more the activities found.
func TestAStepRunAgainAfterAFailedTaskRecordsWhatItsPlanSaid(t *testing.T) {
	m := oneService("l")
	objects := []string{"Ingress/lease-ingress"}
	web := activities.Classification{Service: "web", Class: activities.ChangeNone}
	p := activities.DeployPlan{Lease: "l", Fingerprint: "0123456789abcdef", Objects: objects, Prune: []string{"Service/api-ip-public"},
		ReleaseHostnames: []string{"old.example.com"}, ReleaseIPs: []string{"public"}, Services: []activities.Classification{web}}
	env := newDeployEnv(t, func(env *deployEnv) {
		env.OnActivity(env.a.PrepareDeploy, mock.Anything, mock.Anything).Return(&activities.PrepareDeployResult{
			Lease: activities.LeaseInfo{ID: "l", Owner: "acme", State: "Active"}, Plan: p}, nil)
		// As run again: everything applied and released already.
		env.OnActivity(env.a.ApplyDeploy, mock.Anything, mock.Anything).Return(&activities.ApplyDeployResult{
			IPs:       map[string]string{},
			Hostnames: &activities.HostnamesResult{Reserved: []string{"web.example.com"}},
			Applied:   &activities.ApplyObjectsResult{Kept: objects},
			Classes:   []activities.Classification{web},
		}, nil)
		env.OnActivity(env.a.FinishDeploy, mock.Anything, mock.Anything).Return(&activities.FinishDeployResult{}, nil)
	})
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: m, Trigger: "test"})
	require.True(t, env.IsWorkflowCompleted())
	in := continuedWith(t, env.GetWorkflowError())
	require.NotEmpty(t, deployed(in).Carry.History)
	ran := deployed(in).Carry.History[len(deployed(in).Carry.History)-1].Operations
	for _, want := range []string{plan.ApplyObject("Ingress/lease-ingress").Text, plan.DeleteObject("Service/api-ip-public").Text,
		plan.ReleaseHostname("old.example.com").Text, plan.ReleaseIP("public").Text} {
		assert.Contains(t, ran, want)
	}
}
