package lease

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
)

// temporalBlobLimit is Temporal's default BlobSizeLimitError: a payload
// over it is refused, and a refused continue-as-new leaves the workflow's
// task failing in a loop.
const temporalBlobLimit = 2 << 20

// largestManifest is a valid manifest of nearly manifest.MaxSize bytes.
func largestManifest(t *testing.T) manifest.Manifest {
	t.Helper()
	m := oneService("l")
	m.Services[0].Env = map[string]string{"BLOB": ""}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	m.Services[0].Env["BLOB"] = strings.Repeat("x", manifest.MaxSize-len(b)-16)
	b, err = json.Marshal(m)
	require.NoError(t, err)
	parsed, err := manifest.Parse(b)
	require.NoError(t, err, "the largest manifest is valid")
	require.Greater(t, len(b), manifest.MaxSize-64)
	return *parsed
}

// Issue 20.7, at the limits: the payload a lease's workflow continues as
// new with stays under Temporal's blob limit for the largest valid
// manifest, deployed, last-known-good, pending and last failed at once,
// with a full history of deploys with large executed trees. Before, a
// manifest could be 1 MiB, and four of them made a 4 MiB payload.
func TestTheContinueAsNewPayloadFitsTemporalsBlobLimitAtTheLimits(t *testing.T) {
	m := largestManifest(t)
	var history []api.DeployRecord
	for i := range maxHistoryRecords {
		tree := plan.New(plan.OpDeploy, "l", "deploy")
		for j := range 400 {
			tree.Children = append(tree.Children, plan.New(plan.OpRollOut, fmt.Sprintf("svc-%d", j), strings.Repeat("step ", 20)))
		}
		history = append(history, api.DeployRecord{Revision: int64(i + 1), Trigger: "cli", Outcome: "Succeeded", Tree: tree, Rollback: tree})
	}
	var deployed []deployedManifest
	for i := range maxRollbackTargets {
		deployed = append(deployed, deployedManifest{Revision: int64(i + 10), Manifest: m})
	}
	in := deployInput{DeployInput: api.DeployInput{Manifest: m, Trigger: "cli"}, Carry: &deployCarry{
		Phase: api.PhaseActive, LastGood: &m, Pending: &m, LastFailed: &m, Revision: 20, History: history, Deployed: deployed,
	}}
	require.Greater(t, size(in), temporalBlobLimit, "the test is at the limits: untrimmed, it is over")

	out := fitCarry(in)
	assert.LessOrEqual(t, size(out), carryBudget)
	assert.Less(t, size(out), temporalBlobLimit)
	require.NotEmpty(t, out.Carry.History)
	assert.Equal(t, int64(20), out.Carry.History[len(out.Carry.History)-1].Revision, "the newest record stays")
	assert.NotNil(t, out.Carry.History[len(out.Carry.History)-1].Tree, "with its tree")
	assert.Equal(t, m.Services[0].Env, out.Carry.LastGood.Services[0].Env, "the manifests are carried whole")
	assert.NotNil(t, out.Carry.Pending)
	assert.NotNil(t, out.Carry.LastFailed)
	assert.Len(t, in.Carry.History[0].Tree.Children, 400, "the run's own history is not changed")

	small := deployInput{DeployInput: api.DeployInput{Manifest: oneService("l")}, Carry: &deployCarry{Phase: api.PhaseActive, History: history[:1]}}
	assert.Equal(t, small, fitCarry(small), "a payload within the budget is carried as it is")
}
