package fleet

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/deployflow/deployflow/workflows"
)

// A placement's return to the last-known-good manifest is sent only where
// the placement's deploy is the cluster's last, or the one it runs now (an
// abort interrupted it in flight: the return supersedes it). Guards the
// return never overriding a deploy someone sent since: before this, a
// return went ahead while another deploy ran after the placement's.
func TestAReturnGoesOnlyWhereThePlacementsDeployIsTheLatest(t *testing.T) {
	const key = "placement:run:1:eu:deploy"
	recs := func(keys ...string) []workflows.DeployRecord {
		var out []workflows.DeployRecord
		for _, k := range keys {
			out = append(out, workflows.DeployRecord{Key: k})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		st    workflows.DeployStatus
		found bool
		want  string
	}{
		{"its last deploy, the lease idle", workflows.DeployStatus{Phase: workflows.PhaseActive, History: recs("", key)}, true, ""},
		{"its last deploy failed there", workflows.DeployStatus{Phase: workflows.PhaseFailed, History: recs(key)}, true, ""},
		{"in flight (interrupted)", workflows.DeployStatus{Phase: workflows.PhaseDeploying, DeployingKey: key, History: recs("")}, true, ""},
		{"accepted, not yet started", workflows.DeployStatus{Phase: workflows.PhaseActive, Pending: true, DeployingKey: key, History: recs("")}, true, ""},
		{"deployed again since", workflows.DeployStatus{Phase: workflows.PhaseActive, History: recs(key, "")}, true, "deployed again since the placement's deploy"},
		{"another deploy runs after it", workflows.DeployStatus{Phase: workflows.PhaseDeploying, History: recs(key)}, true, "deployed again since the placement's deploy"},
		{"another keyed deploy waits", workflows.DeployStatus{Phase: workflows.PhaseActive, Pending: true, DeployingKey: "other", History: recs(key)}, true, "deployed again since the placement's deploy"},
		{"another awaits approval", workflows.DeployStatus{Phase: workflows.PhaseAwaitingApproval, History: recs(key)}, true, "deployed again since the placement's deploy"},
		{"never reached it", workflows.DeployStatus{Phase: workflows.PhaseActive, History: recs("")}, true, "the placement's deploy never reached it"},
		{"no lease workflow", workflows.DeployStatus{}, false, "the lease has no workflow there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, movedOn(tc.st, tc.found, key))
		})
	}
}
