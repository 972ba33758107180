package lease

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
)

// Issue 36.1: the printed plan is the executed plan. For every kind of
// deploy (a first one, with a new IP and hostname; a rolling update; a
// scale; a canary, with its steps and background analysis; a blue-green;
// an update that drops a hostname, an IP and an object; one with nothing
// to do), the tree the lease's history keeps is the tree `deploy --plan`
// printed (activities.Tree, what PlanDeploy returns), node for node, each
// done. Before, the deploy was a fixed sequence that rebuilt its tree
// after the fact from what its activities returned.
func TestTheExecutedTreeIsThePrintedOneForEveryKindOfDeploy(t *testing.T) {
	objects := []string{"Ingress/lease-ingress", "Service/web"}
	update := activities.Classification{Service: "web", Class: activities.ChangeRollout,
		CurrentImage: "nginx:1.26", DesiredImage: "nginx:1.27", CurrentReplicas: 1, DesiredReplicas: 1}
	unchanged := activities.Classification{Service: "web", Class: activities.ChangeNone}
	first := oneService("l")
	first.Services[0].Ports = append(first.Services[0].Ports, manifest.Port{Port: 8443, Expose: &manifest.Expose{IP: "public"}})
	three, weight := int32(3), int32(50)
	scaled := oneService("l")
	scaled.Services[0].Replicas = &three
	canary := oneService("l")
	canary.Services[0].Rollout = &manifest.Rollout{Strategy: manifest.StrategyCanary,
		Steps: []manifest.CanaryStep{{SetWeight: &weight}, {Pause: &manifest.Pause{Duration: "1m"}}}}
	blueGreen := oneService("l")
	blueGreen.Services[0].Rollout = &manifest.Rollout{Strategy: manifest.StrategyBlueGreen, BlueGreen: &manifest.BlueGreen{AutoPromotionSeconds: 30}}

	for _, tc := range []struct {
		name string
		m    manifest.Manifest
		plan activities.DeployPlan // as PrepareDeploy read the cluster
		ips  map[string]string     // the lease's declared IPs, once applied
	}{
		{"a first deploy", first, activities.DeployPlan{AllocateIPs: []string{"public"}, ReserveHostnames: []string{"web.example.com"},
			Objects:  append(append([]string(nil), objects...), "Service/web-ip-public"),
			Services: []activities.Classification{{Service: "web", Class: activities.ChangeRollout, DesiredImage: "nginx:1.27", DesiredReplicas: 1}}},
			map[string]string{"public": "192.0.2.10"}},
		{"a rolling update", oneService("l"), activities.DeployPlan{Objects: objects, Services: []activities.Classification{update}}, nil},
		{"a scale", scaled, activities.DeployPlan{Services: []activities.Classification{{Service: "web", Class: activities.ChangeScale,
			CurrentImage: "nginx:1.27", DesiredImage: "nginx:1.27", CurrentReplicas: 1, DesiredReplicas: 3}}}, nil},
		{"a canary", canary, activities.DeployPlan{Objects: objects, Services: []activities.Classification{update}}, nil},
		{"a blue-green", blueGreen, activities.DeployPlan{Objects: objects, Services: []activities.Classification{update}}, nil},
		{"an update that drops a hostname, an IP and an object", oneService("l"), activities.DeployPlan{
			Objects: objects, Prune: []string{"Service/web-ip-public"}, ReleaseHostnames: []string{"old.example.com"}, ReleaseIPs: []string{"public"},
			Services: []activities.Classification{unchanged}}, nil},
		{"nothing to do", oneService("l"), activities.DeployPlan{Services: []activities.Classification{unchanged}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.plan
			p.Lease, p.Fingerprint = "l", "0123456789abcdef"
			// What `deploy --plan` prints: the tree PlanDeploy builds for
			// the manifest as the lease takes it (its defaults filled).
			printed := activities.Tree(&p, tc.m.WithDefaults())
			p.Tree = printed.Clone()
			result := api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}
			for _, n := range printed.Children {
				if steps := len(n.ByOp(plan.OpCanaryStep)); steps > 0 {
					result.Canary = &api.StepsResult{Completed: steps}
				}
				if steps := len(n.ByOp(plan.OpBlueGreenStep)); steps > 0 {
					result.BlueGreen = &api.StepsResult{Completed: steps}
				}
			}
			if n := printed.Find(plan.OpScale, "web"); n != nil {
				result.DesiredReplicas = 3
			}

			env := newDeployEnv(t, func(env *deployEnv) {
				env.OnActivity(env.a.PrepareDeploy, mock.Anything, mock.Anything).Return(&activities.PrepareDeployResult{
					Lease: activities.LeaseInfo{ID: "l", Owner: "acme", State: "Active"}, Plan: p}, nil)
				ips := tc.ips
				if ips == nil {
					ips = map[string]string{}
				}
				env.OnActivity(env.a.ApplyDeploy, mock.Anything, mock.Anything).Return(&activities.ApplyDeployResult{
					IPs:       ips,
					Hostnames: &activities.HostnamesResult{Reserved: []string{"web.example.com"}},
					Applied:   &activities.ApplyObjectsResult{Changed: p.Objects, Pruned: p.Prune, Kept: objects},
					Classes:   p.Services,
				}, nil)
				env.rollouts(result, nil)
			})
			env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: tc.m, Trigger: "test"})
			require.True(t, env.IsWorkflowCompleted())
			history := deployed(continuedWith(t, env.GetWorkflowError())).Carry.History
			require.NotEmpty(t, history)
			rec := history[len(history)-1]
			require.Equal(t, "Succeeded", rec.Outcome)
			require.NotNil(t, rec.Tree)
			assert.Equal(t, shape(printed), shape(rec.Tree), "the executed tree is the printed one:\n%s", rec.Tree)
			rec.Tree.Walk(func(n *plan.Node, _ int) {
				assert.Equal(t, plan.Done, n.State, "%s: %s", n.Text, n.Error)
			})
		})
	}
}

// shape is a tree as `deploy --plan` prints it: each node's depth,
// operation, target and words, in order.
func shape(t *plan.Node) []string {
	var out []string
	t.Walk(func(n *plan.Node, depth int) {
		out = append(out, fmt.Sprintf("%d %s %s %q", depth, n.Op, n.Target, n.Text))
	})
	return out
}

// Issue 36.1: the tree is the program. A step the plan's tree does not
// have is not run: a tree without the release step (a plan that had
// nothing it could release) calls no release. Before, the deploy ran its
// fixed sequence whatever the tree said, and marked the tree after it.
func TestADeployRunsTheStepsOfItsTreeAndOnlyThose(t *testing.T) {
	m := oneService("l")
	update := activities.Classification{Service: "web", Class: activities.ChangeRollout,
		CurrentImage: "nginx:1.26", DesiredImage: "nginx:1.27", CurrentReplicas: 1, DesiredReplicas: 1}
	p := activities.DeployPlan{Lease: "l", Fingerprint: "0123456789abcdef", Services: []activities.Classification{update}}
	printed := activities.Tree(&p, m.WithDefaults())
	printed.Children = printed.Children[:len(printed.Children)-1] // no release step
	p.Tree = printed.Clone()
	released := 0
	env := newDeployEnv(t, func(env *deployEnv) {
		env.OnActivity(env.a.PrepareDeploy, mock.Anything, mock.Anything).Return(&activities.PrepareDeployResult{
			Lease: activities.LeaseInfo{ID: "l", Owner: "acme", State: "Active"}, Plan: p}, nil)
		env.OnActivity(env.a.FinishDeploy, mock.Anything, mock.Anything).Return(
			func(context.Context, activities.FinishDeployInput) (*activities.FinishDeployResult, error) {
				released++
				return &activities.FinishDeployResult{}, nil
			})
		env.rollouts(api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil)
	})
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: m, Trigger: "test"})
	require.True(t, env.IsWorkflowCompleted())
	history := deployed(continuedWith(t, env.GetWorkflowError())).Carry.History
	require.NotEmpty(t, history)
	rec := history[len(history)-1]
	assert.Equal(t, "Succeeded", rec.Outcome)
	assert.Zero(t, released, "the tree has no release step: nothing is released")
	assert.Equal(t, shape(printed), shape(rec.Tree))
}

// A plan recorded before plans had trees (a lease's history replayed from
// an older worker) runs the tree internal/plan builds from what it read,
// and the lease's history shows it. Before, such a deploy kept no tree.
func TestAPlanWithoutATreeRunsTheOneItsReadingsMake(t *testing.T) {
	m := oneService("l")
	update := activities.Classification{Service: "web", Class: activities.ChangeRollout,
		CurrentImage: "nginx:1.26", DesiredImage: "nginx:1.27", CurrentReplicas: 1, DesiredReplicas: 1}
	p := activities.DeployPlan{Lease: "l", Fingerprint: "0123456789abcdef", Objects: []string{"Service/web"}, Services: []activities.Classification{update}}
	env := newDeployEnv(t, func(env *deployEnv) {
		env.OnActivity(env.a.PrepareDeploy, mock.Anything, mock.Anything).Return(&activities.PrepareDeployResult{
			Lease: activities.LeaseInfo{ID: "l", Owner: "acme", State: "Active"}, Plan: p}, nil)
		env.OnActivity(env.a.ApplyDeploy, mock.Anything, mock.Anything).Return(&activities.ApplyDeployResult{
			IPs:       map[string]string{},
			Hostnames: &activities.HostnamesResult{Reserved: []string{"web.example.com"}},
			Applied:   &activities.ApplyObjectsResult{Changed: p.Objects, Kept: p.Objects},
			Classes:   p.Services,
		}, nil)
		env.rollouts(api.RolloutResult{Outcome: api.OutcomeComplete, DesiredReplicas: 1}, nil)
	})
	env.ExecuteWorkflow(DeployWorkflow, api.DeployInput{Manifest: m, Trigger: "test"})
	require.True(t, env.IsWorkflowCompleted())
	history := deployed(continuedWith(t, env.GetWorkflowError())).Carry.History
	require.NotEmpty(t, history)
	rec := history[len(history)-1]
	assert.Equal(t, "Succeeded", rec.Outcome)
	require.NotNil(t, rec.Tree, "the deploy kept the tree it ran")
	assert.Equal(t, shape(activities.Tree(&p, m.WithDefaults())), shape(rec.Tree))
}
