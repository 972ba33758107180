package main_test

import (
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 10.5: three workers share a task queue; one is SIGKILLed while 20
// deploys are mid-rollout. Every deploy finishes on the others, nothing is
// written twice (each ReplicaSet's generation is its create plus the
// scales its rollout decided), and deployflow_leases{phase} is the fleet's
// count on every worker — and on a worker started after all of them died.
func TestTwentyDeploysSurviveOneOfThreeWorkersSIGKILLed(t *testing.T) {
	env := testenv.Get(t)
	tq := testenv.Name(t, "tq")
	var workers []*workerProcess
	var addrs []string
	for i := 0; i < 3; i++ {
		addrs = append(addrs, freeAddr(t))
		workers = append(workers, startWorker(t, env, tq, addrs[i]))
	}

	leases := startDeploys(t, env, tq, testenv.ShortName("mw"), 20, "30s")
	require.NoError(t, workers[0].cmd.Process.Signal(syscall.SIGKILL))
	<-workers[0].exited

	for _, id := range leases {
		assertActiveAndWrittenOnce(t, env, id)
	}

	// Every surviving worker reports the fleet: 20 Active.
	for _, addr := range addrs[1:] {
		waitLeasesGauge(t, addr, "Active", 20)
	}
	// All die; a new worker reports the same from its first scrape.
	for _, w := range workers[1:] {
		require.NoError(t, w.cmd.Process.Signal(syscall.SIGKILL))
		<-w.exited
	}
	fresh := freeAddr(t)
	startWorker(t, env, tq, fresh)
	waitLeasesGauge(t, fresh, "Active", 20)
}

var leasesGauge = regexp.MustCompile(`(?m)^deployflow_leases\{phase="([A-Za-z]+)"\} (\d+)$`)

// waitLeasesGauge waits until the worker at addr exports
// deployflow_leases{phase} = want.
func waitLeasesGauge(t *testing.T, addr, phase string, want int) {
	t.Helper()
	var last string
	require.Eventually(t, func() bool {
		last = get("http://" + addr + "/metrics")
		for _, m := range leasesGauge.FindAllStringSubmatch(last, -1) {
			if n, _ := strconv.Atoi(m[2]); m[1] == phase && n == want {
				return true
			}
		}
		return false
	}, 3*time.Minute, 500*time.Millisecond, "worker %s: want deployflow_leases{phase=%q} %d; has:\n%v", addr, phase, want,
		leasesGauge.FindAllString(last, -1))
}
