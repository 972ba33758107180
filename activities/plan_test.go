package activities

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
)

// The plan's tree: what the lease's workflow executes, in its order, with a
// canary's steps under its rollout once there is a version to compare with.
func TestTree(t *testing.T) {
	w := int32(50)
	canary := &manifest.Rollout{Strategy: manifest.StrategyCanary, Steps: []manifest.CanaryStep{
		{SetWeight: &w}, {Pause: &manifest.Pause{}},
	}}
	m := &manifest.Manifest{Lease: "a", Services: []manifest.Service{
		{Name: "web", Image: "nginx:1.27", Rollout: canary}, {Name: "api", Image: "api:1"}, {Name: "db", Image: "db:1"},
	}}
	p := &DeployPlan{
		Lease: "a", ReserveHostnames: []string{"a.example.com"}, AllocateIPs: []string{"public"},
		Objects: []string{"Service/web"}, Prune: []string{"Service/old"},
		ReleaseHostnames: []string{"b.example.com"}, ReleaseIPs: []string{"gone"},
		Services: []Classification{
			{Service: "web", Class: ChangeRollout, CurrentImage: "nginx:1.26", DesiredImage: "nginx:1.27", CurrentReplicas: 2, DesiredReplicas: 2},
			{Service: "api", Class: ChangeScale, CurrentReplicas: 1, DesiredReplicas: 3},
			{Service: "db", Class: ChangeNone},
		},
	}
	assert.Equal(t, `deploy lease a
├─ check that lease a is active
├─ reserve and apply, in namespace lease-a
│  ├─ allocate an IP for endpoint public
│  ├─ reserve hostname a.example.com
│  ├─ apply Service/web
│  └─ delete Service/old
├─ roll out web: nginx:1.26 → nginx:1.27, 2 → 2 replicas (canary, 2 steps)
│  ├─ step 1/2: setWeight 50%
│  └─ step 2/2: pause until promoted
├─ scale api: 1 → 3 replicas
└─ release what the manifest no longer declares, once healthy
   ├─ release hostname b.example.com
   └─ release the IP of endpoint gone
`, Tree(p, m).String())

	// A first deploy has nothing stable to compare with: no canary steps.
	change, ok := ServiceChange(Classification{Service: "web", Class: ChangeRollout, DesiredImage: "nginx:1.27", DesiredReplicas: 2}, m)
	require.True(t, ok)
	first := plan.Service(change)
	assert.Equal(t, plan.OpRollOut, first.Op)
	assert.Empty(t, first.Children)
	_, ok = ServiceChange(Classification{Service: "db", Class: ChangeMetadata}, m)
	assert.False(t, ok, "pods stay: no rollout")
}

// A deploy fills its manifest's defaults once, where its chain starts
// (workflows/lease/chain.go; PlanWorkflow for `deploy --plan`); the
// activities after it do not fill them again. This guards that a caller
// that skipped that is told so, by name, before anything is read or
// written, instead of having the defaults filled a second time.
func TestAStepAfterTheChainsStartRefusesAManifestWithoutItsDefaults(t *testing.T) {
	raw := manifest.Manifest{Lease: "a", Services: []manifest.Service{{Name: "web", Image: "nginx:1.27"}}}
	a := &Activities{} // no cluster: the refusal comes first
	_, err := a.PlanDeploy(t.Context(), PlanInput{Manifest: raw})
	assertNoDefaults(t, err, "PlanDeploy")
	_, err = a.PrepareDeploy(t.Context(), PrepareDeployInput{Manifest: raw})
	assertNoDefaults(t, err, "PrepareDeploy")
	_, err = a.ApplyDeploy(t.Context(), ApplyDeployInput{Manifest: raw})
	assertNoDefaults(t, err, "ApplyDeploy")
}

func assertNoDefaults(t *testing.T, err error, step string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, ErrInvalidInput, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, appErr.Error(), step+": the manifest of lease a has no defaults: pass manifest.WithDefaults() of it")
}
