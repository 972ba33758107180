package manifest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 23.2: a placement's waves are checked for shape here (each problem
// named by its field, with the fix), and its clusters against the
// worker's by CheckClusters.
func TestPlacementValidation(t *testing.T) {
	base := func(p string) string {
		return "lease: shop\nservices: [{name: web, image: nginx:1.27}]\nplacement: " + p + "\n"
	}
	ok, err := Parse([]byte(base(`{waves: [{clusters: [staging]}, {clusters: [eu-1], pause: {duration: 10m}, analysis: {prometheus: {query: "vector(1)"}, successCondition: "result == 1"}}, {clusters: [us-1, us-2]}]}`)))
	require.NoError(t, err)
	assert.Equal(t, []string{"staging", "eu-1", "us-1", "us-2"}, ok.Placement.Clusters())
	assert.Equal(t, "10m0s", ok.Placement.Waves[1].PauseDuration().String())
	assert.Nil(t, ok.WithoutPlacement().Placement, "one cluster's manifest has no placement")
	assert.NotNil(t, ok.Placement, "and the manifest keeps its own")

	for p, want := range map[string]string{
		`{waves: []}`:                                         "placement.waves: is empty",
		`{waves: [{clusters: []}]}`:                           "placement.waves[0].clusters: is empty",
		`{waves: [{clusters: [EU]}]}`:                         `placement.waves[0].clusters[0]: "EU" is not a cluster name`,
		`{waves: [{clusters: [a]}, {clusters: [b, a]}]}`:      "placement.waves[1].clusters[1]: cluster a is already in placement.waves[0].clusters[0]",
		`{waves: [{clusters: [a], pause: {duration: soon}}]}`: `placement.waves[0].pause.duration: "soon" is not a duration`,
		`{waves: [{clusters: [a], pause: {duration: 48h}}]}`:  "placement.waves[0].pause.duration: 48h: want more than 0 and at most 24h0m0s",
		`{waves: [{clusters: [a], analysis: {http: {url: "http://x"}, successCondition: "result == 200"}}]}`: "placement.waves[0].analysis.http: a wave's analysis is a Prometheus query (prometheus: {query: ...}) or a Job run in each of its clusters",
		`{waves: [{clusters: [a], analysis: {job: {image: ""}}}]}`:                                           "placement.waves[0].analysis.job.image",
		`{wave: [{clusters: [a]}]}`: "placement.wave",
	} {
		_, err := Parse([]byte(base(p)))
		require.Error(t, err, p)
		assert.Contains(t, err.Error(), want, p)
	}

	// A wave's Job (a smoke test run in each of its clusters): valid, and
	// its pod annotations held to the reserved prefixes as a service's.
	job, err := Parse([]byte(base(`{waves: [{clusters: [a], analysis: {job: {image: "busybox:1.36", command: ["true"], podAnnotations: {"deployflow.dev/x": "y"}}}}]}`)))
	require.NoError(t, err)
	err = job.CheckReservedKeys(nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `placement.waves[0].analysis.job.podAnnotations["deployflow.dev/x"]: the prefix deployflow.dev is reserved`)

	err = ok.Placement.CheckClusters([]string{"local", "staging", "eu-1", "us-1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `placement.waves[2].clusters[1]: unknown cluster "us-2": the worker deploys to [local staging eu-1 us-1]`)
	assert.Equal(t, 1, strings.Count(err.Error(), "unknown cluster"))
	assert.NoError(t, ok.Placement.CheckClusters([]string{"staging", "eu-1", "us-1", "us-2"}))
}

// Found in review: a wave's analysis skipped the operator's limits (a
// tenant could ask for 2^31 measurements every millisecond of the
// worker's Prometheus). It is held to them like a rollout's.
func TestAWavesAnalysisIsHeldToTheOperatorsLimits(t *testing.T) {
	m, err := Parse([]byte(`lease: shop
services: [{name: web, image: nginx:1.27}]
placement:
  waves:
    - clusters: [local]
    - clusters: [eu-1]
      analysis: {prometheus: {query: "vector(1)"}, successCondition: "result == 1", interval: 1ms, count: 2147483647}
`))
	require.NoError(t, err, "valid in shape: the limits are the operator's")
	err = m.CheckLimits(Limits{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "placement.waves[1].analysis.interval: 1ms: this provider measures at most every 1s (the operator's --min-analysis-interval)")
	assert.Contains(t, err.Error(), "placement.waves[1].analysis.count: 2147483647 measurements: this provider allows at most 1000 per analysis (the operator's --max-analysis-count)")
}
