package main_test

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 9.4, a live upgrade: 20 leases are mid-deploy (slow pods) on worker
// build A (this tree's, or with DEPLOYFLOW_UPGRADE_FROM an older release's
// binary: hack/upgrade-check.sh); build B (a deliberately changed, version-gated workflow: go build
// -tags upgradetest) starts and A stops. Every deploy finishes, nothing is
// written twice (each ReplicaSet's generation is one create plus the scales
// its rollout decided), and a lease deployed after the switch runs B's
// behaviour.
func TestLiveUpgradeInTheMiddleOfTwentyDeploys(t *testing.T) {
	env := testenv.Get(t)
	tq := testenv.Name(t, "tq")
	binB := workerBinaryWithTags(t, "upgradetest")
	binA := workerBinary(t)
	if from := os.Getenv("DEPLOYFLOW_UPGRADE_FROM"); from != "" {
		binA = from // a provider's upgrade: the release it runs (hack/upgrade-check.sh)
	}
	a := startWorkerBinary(t, env, binA, tq, freeAddr(t))

	base := testenv.ShortName("upg")
	// All 20 are mid-rollout on A: their ReplicaSets exist, pods not ready.
	leases := startDeploys(t, env, tq, base, 20, "30s")

	// The upgrade: B starts, A stops (SIGTERM: it drains and exits).
	startWorkerBinary(t, env, binB, tq, freeAddr(t))
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-a.exited:
		require.NoError(t, err, "build A exits cleanly")
	case <-time.After(2 * time.Minute):
		t.Fatal("build A still running 2 minutes after SIGTERM")
	}

	for _, id := range leases {
		assertActiveAndWrittenOnce(t, env, id)
	}

	// A lease deployed after the switch runs build B's behaviour.
	after := base + "-after"
	startDeploy(t, env, tq, after, "1s")
	st := deployEnded(t, env, after)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Contains(t, st.History[len(st.History)-1].Outcome, "(build B)")
}
