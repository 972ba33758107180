package lease

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/api"
)

// kept is a lease that deployed revisions 1..n successfully, each with
// image "app:<revision>", running the last.
func kept(n int64) *deployRun {
	w := &deployRun{lease: "l"}
	w.Phase = api.PhaseActive
	for r := int64(1); r <= n; r++ {
		m := oneService("l")
		m.Services[0].Image = "app:" + string(rune('0'+r))
		w.Revision = r
		w.remember(r, &m)
	}
	return w
}

// Issue 37.4: which deploy a rollback returns to, and when it is refused,
// naming what the lease can return to.
func TestRollbackTarget(t *testing.T) {
	for _, c := range []struct {
		name     string
		w        func() *deployRun
		to       int64
		want     int64  // the target's revision
		refusal  string // or the refusal
		targets  []int64
		rejected []int64
	}{
		{name: "the one before the running one", w: func() *deployRun { return kept(3) }, want: 2, targets: []int64{1, 2}},
		{name: "any kept one", w: func() *deployRun { return kept(3) }, to: 1, want: 1},
		{name: "the one before, skipping a rejected one", w: func() *deployRun { w := kept(3); w.Rejected = []int64{2}; return w }, want: 1, targets: []int64{1}},
		{name: "a rejected one", w: func() *deployRun { w := kept(3); w.Rejected = []int64{1}; return w }, to: 1,
			refusal: "deploy #1 of lease l was rejected (deployflow reject): a rollback does not deploy it again"},
		{name: "the running one", w: func() *deployRun { return kept(3) }, to: 3, refusal: "deploy #3 is what lease l runs: there is nothing to return to"},
		{name: "the running one after a failure", w: func() *deployRun { w := kept(3); w.Revision, w.Phase = 4, api.PhaseFailed; return w }, to: 3, want: 3},
		{name: "one not kept", w: func() *deployRun { return kept(3) }, to: 7,
			refusal: "to: deploy #7 is not one lease l can return to: a rollback returns to one of its last 10 successful deploys (kept: #1, #2)"},
		{name: "nothing before", w: func() *deployRun { return kept(1) }, refusal: "lease l has no earlier successful deploy to return to (kept: none)"},
		{name: "negative", w: func() *deployRun { return kept(2) }, to: -1, refusal: "to: -1: give a deploy's revision"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := c.w()
			d, err := w.rollbackTarget(c.to)
			if c.refusal != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.refusal)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, d.Revision)
			assert.Equal(t, "app:"+string(rune('0'+c.want)), d.Manifest.Services[0].Image, "the manifest of that deploy")
			if c.targets != nil {
				assert.Equal(t, c.targets, w.rollbackTargets())
			}
		})
	}
}

// A lease keeps the manifests of its last maxRollbackTargets successful
// deploys, the one running last.
func TestTheLeaseKeepsItsLastSuccessfulDeploys(t *testing.T) {
	w := kept(maxRollbackTargets + 3)
	require.Len(t, w.Deployed, maxRollbackTargets)
	assert.Equal(t, int64(4), w.Deployed[0].Revision)
	assert.Equal(t, int64(maxRollbackTargets+3), w.LastGoodRevision)
	assert.Len(t, w.rollbackTargets(), maxRollbackTargets-1, "all but the one running")
}
