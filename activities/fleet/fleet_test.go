package fleet

import (
	"testing"

	"github.com/deployflow/deployflow/api"
	"github.com/stretchr/testify/assert"
)

// A placement's return to the last-known-good manifest is sent only where
// the placement's deploy is the cluster's last, or the one it runs now (an
// abort interrupted it in flight: the return supersedes it). Guards the
// return never overriding a deploy someone sent since: before this, a
// return went ahead while another deploy ran after the placement's.
func TestAReturnGoesOnlyWhereThePlacementsDeployIsTheLatest(t *testing.T) {
	const key = "placement:run:1:eu:deploy"
	recs := func(keys ...string) []api.DeployRecord {
		var out []api.DeployRecord
		for _, k := range keys {
			out = append(out, api.DeployRecord{Key: k})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		st    api.DeployStatus
		found bool
		want  string
	}{
		{"its last deploy, the lease idle", api.DeployStatus{Phase: api.PhaseActive, History: recs("", key)}, true, ""},
		{"its last deploy failed there", api.DeployStatus{Phase: api.PhaseFailed, History: recs(key)}, true, ""},
		{"in flight (interrupted)", api.DeployStatus{Phase: api.PhaseDeploying, DeployingKey: key, History: recs("")}, true, ""},
		{"accepted, not yet started", api.DeployStatus{Phase: api.PhaseActive, Pending: true, DeployingKey: key, History: recs("")}, true, ""},
		{"deployed again since", api.DeployStatus{Phase: api.PhaseActive, History: recs(key, "")}, true, "deployed again since the placement's deploy"},
		{"another deploy runs after it", api.DeployStatus{Phase: api.PhaseDeploying, History: recs(key)}, true, "deployed again since the placement's deploy"},
		{"another keyed deploy waits", api.DeployStatus{Phase: api.PhaseActive, Pending: true, DeployingKey: "other", History: recs(key)}, true, "deployed again since the placement's deploy"},
		{"another awaits approval", api.DeployStatus{Phase: api.PhaseAwaitingApproval, History: recs(key)}, true, "deployed again since the placement's deploy"},
		{"never reached it", api.DeployStatus{Phase: api.PhaseActive, History: recs("")}, true, "the placement's deploy never reached it"},
		{"no lease workflow", api.DeployStatus{}, false, "the lease has no workflow there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, movedOn(tc.st, tc.found, key))
		})
	}
}
