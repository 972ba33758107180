package rollout

import (
	"testing"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 35: a rollout started by hand carries its canary steps and
// analyses without a manifest around them, and they were never validated
// (a condition in expr's full language, a PromQL query no lease scope
// fits, a step that is two things at once: each reached the activities
// that measure). They are validated as a manifest's would be, naming the
// field; a lease's own rollout, from a manifest its lease validated by the
// rules of its day, and a continued run by the rules that run took.
func TestAHandStartedRolloutsAnalysesAreValidatedLikeAManifests(t *testing.T) {
	weight := int32(50)
	legacy := &manifest.Analysis{Prometheus: &manifest.PrometheusQuery{Query: `rate(x{namespace="lease-l"}[1m])`}, SuccessCondition: "result in [200, 204]"}
	for _, tc := range []struct {
		name string
		in   api.RolloutInput
		want []string
	}{
		{"a step that is two things", api.RolloutInput{Steps: []manifest.CanaryStep{{SetWeight: &weight, Pause: &manifest.Pause{}}}},
			[]string{"steps[0]: a step is exactly one of"}},
		{"a condition in expr's language", api.RolloutInput{Steps: []manifest.CanaryStep{{SetWeight: &weight}}, Background: legacy},
			[]string{"background.successCondition", "background.prometheus.query"}},
		{"a blue-green's analysis without a query", api.RolloutInput{BlueGreen: &manifest.BlueGreen{PrePromotionAnalysis: &manifest.Analysis{SuccessCondition: "result > 0"}}},
			[]string{"blueGreen.prePromotionAnalysis.prometheus.query: is required"}},
	} {
		tc.in.Namespace, tc.in.Service = "shop", "web"
		err := rolledOut(tc.in).guard(false, false)
		require.Error(t, err, tc.name)
		for _, w := range tc.want {
			assert.Contains(t, err.Error(), w, tc.name)
		}
	}
	lenient := api.RolloutInput{Namespace: "shop", Service: "web", Steps: []manifest.CanaryStep{{Analysis: legacy}}}
	assert.Error(t, rolledOut(lenient).guard(false, false), "by hand: today's rules")
	assert.NoError(t, rolledOut(lenient).guard(false, true), "a lease's own rollout: its lease validated it")
	assert.NoError(t, rolledOut(lenient).guard(true, false), "a continued run: the rules it took")
}

func TestARolloutsReplicasAreBoundedLikeALeasesService(t *testing.T) {
	n := int32(100000)
	in := api.RolloutInput{Namespace: "shop", Service: "web"}
	in.Deployment.Spec.Replicas = &n
	err := rolledOut(in).guard(false, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "deployment.spec.replicas: 100000 is too many: use at most 1000")
}

// Issue 20.7: a rollout's carry, typed by hand into a fresh start, is
// refused; the workflow's own continued run takes it.
func TestARolloutsCarryIsTakenOnlyFromAContinuedRun(t *testing.T) {
	carried := api.RolloutInput{Namespace: "shop", Service: "web", Carry: rawCarry(&rolloutCarry{})}
	assert.Error(t, rolledOut(carried).guard(false, false))
	assert.NoError(t, rolledOut(carried).guard(true, false))
}
