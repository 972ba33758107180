package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// LeaseOfWorkflowID reads back what DeployWorkflowIDIn wrote, and nothing
// else: the rollout finds its parent lease by it, and the lease refuses to
// run for a cluster its ID does not name.
func TestLeaseOfWorkflowIDInvertsDeployWorkflowIDIn(t *testing.T) {
	for _, tc := range []struct{ lease, cluster string }{{"shop", ""}, {"shop", "eu-1"}, {"a-b", "us"}} {
		lease, cluster, ok := LeaseOfWorkflowID(DeployWorkflowIDIn(tc.lease, tc.cluster))
		assert.True(t, ok, "%+v", tc)
		assert.Equal(t, tc.lease, lease)
		assert.Equal(t, tc.cluster, cluster)
	}
	for _, id := range []string{RolloutWorkflowID("lease-shop", "web"), PlacementWorkflowID("shop"), "shop", ""} {
		_, _, ok := LeaseOfWorkflowID(id)
		assert.False(t, ok, "%q is not a lease workflow's ID", id)
	}
}
