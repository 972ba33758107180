package stateful

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// What a stateful rollout refuses before it writes anything: a start
// with no lease's workflow above it, another lease's namespace, a
// StatefulSet that is not the service's, and canary steps it cannot take.
func TestGuardRefusesWhatNoLeaseWouldHaveStarted(t *testing.T) {
	two := int32(2)
	m := manifest.Manifest{Lease: "shop", Services: []manifest.Service{{Name: "db", Image: "postgres:16", Replicas: &two,
		Volumes: []manifest.Volume{{Name: "data", Size: "1Gi", MountPath: "/data", Persistent: true, Class: "local"}}}}}
	sts, err := m.WithDefaults().StatefulSet("db")
	require.NoError(t, err)
	good := func() *run {
		return &run{in: api.StatefulSetRolloutInput{Namespace: manifest.Namespace("shop"), Service: "db", StatefulSet: *sts}, ParentLease: "shop"}
	}
	assert.NoError(t, good().guard(false))
	withAnalysis := good()
	withAnalysis.in.Steps = []manifest.CanaryStep{{SetWeight: &two}, {Analysis: &manifest.Analysis{
		Job: &manifest.JobCheck{Image: "ghcr.io/acme/smoke:1"}}}}
	assert.NoError(t, withAnalysis.guard(false), "a canary's analysis step (issue 39.2)")

	fifty, over := int32(50), int32(101)
	for name, c := range map[string]struct {
		change func(*run)
		want   string
	}{
		"by hand":           {func(r *run) { r.ParentLease = "" }, "started by its lease's workflow"},
		"another namespace": {func(r *run) { r.ParentLease = "other" }, `namespace: "lease-shop" is not lease other's namespace`},
		"another name":      {func(r *run) { r.in.Service = "web" }, `statefulSet.metadata.name: "db" differs from service "web"`},
		"a carry by hand":   {func(r *run) { r.carried = true }, "carry: is set by the workflow itself"},
		"a day and more":    {func(r *run) { r.in.ProgressDeadlineSeconds = maxProgressDeadline + 1 }, "progressDeadlineSeconds"},
		"an analysis with no provider": {func(r *run) {
			r.in.Steps = []manifest.CanaryStep{{SetWeight: &fifty}, {Analysis: &manifest.Analysis{}}}
		}, "steps[1].analysis"},
		"a canary scale": {func(r *run) {
			r.in.Steps = []manifest.CanaryStep{{SetCanaryScale: &manifest.CanaryScale{Replicas: &fifty}}}
		}, "steps[0].setCanaryScale: a stateful service's canary is its released ordinals"},
		"two things in a step": {func(r *run) {
			r.in.Steps = []manifest.CanaryStep{{SetWeight: &fifty, Pause: &manifest.Pause{}}}
		}, "steps[0]: a step is exactly one of"},
		"a weight over 100": {func(r *run) { r.in.Steps = []manifest.CanaryStep{{SetWeight: &over}} }, "steps[0].setWeight: 101"},
		"a bad pause":       {func(r *run) { r.in.Steps = []manifest.CanaryStep{{Pause: &manifest.Pause{Duration: "soon"}}} }, `steps[0].pause.duration: "soon"`},
	} {
		t.Run(name, func(t *testing.T) {
			r := good()
			c.change(r)
			err := r.guard(false)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
