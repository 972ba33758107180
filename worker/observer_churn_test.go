package main_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 40.1: with workers killed and added while the leases change, each
// change of each lease reaches its workflow exactly once. Nine idle leases
// on three workers are each scaled to 0 by hand, then back; during the
// first burst one worker is SIGKILLed and one added, during the second
// another of the first three is SIGKILLed and one more added. Each lease's
// workflow takes the dip once (and the Degraded verdict degradedAfter
// later, the recheck it asked for) and the return once: none is lost
// (a killed owner's lease is sent by its new owner), none taken twice.
// The leases have no safety-net tick within the test (an hour): only the
// observers can tell them.
func TestEachChangeIsTakenOnceWhileWorkersAreKilledAndAdded(t *testing.T) {
	env := testenv.Get(t).Isolated(t)
	tq := testenv.Name(t, "tq")
	const ttl = 3 * time.Second
	procs := map[string]*workerProcess{}
	start := func(id string) {
		procs[id] = startWorker(t, env, tq, freeAddr(t), "--temporal-namespace", env.TemporalNamespace,
			"--observer-identity", id, "--observer-ttl", ttl.String())
	}
	kill := func(id string) {
		require.NoError(t, procs[id].cmd.Process.Signal(syscall.SIGKILL))
		<-procs[id].exited
	}
	for _, id := range []string{"c0", "c1", "c2"} {
		start(id)
	}
	t.Cleanup(func() { deleteMembershipRecords(t, env, env.TemporalNamespace+"/"+tq) })

	leases := deployIdleLeases(t, env, tq, "oc", 9)
	taken := map[string]int{}
	for _, id := range leases {
		taken[id] = len(takenWebObservations(t, env, id))
	}

	// burst scales every lease's web to replicas, killing one worker and
	// adding another halfway through.
	burst := func(replicas int32, killed, added string) {
		for i, id := range leases {
			if i == len(leases)/2 {
				kill(killed)
				start(added)
			}
			env.ScaleService(t, id, "web", replicas)
		}
	}
	burst(0, "c0", "c3") // the dip
	for _, id := range leases {
		waitLeasePhase(t, env, id, api.PhaseDegraded, 2*time.Minute)
		waitNoPods(t, env, id)
	}
	burst(3, "c1", "c4") // the return
	for _, id := range leases {
		waitLeasePhase(t, env, id, api.PhaseActive, 2*time.Minute)
	}

	for _, id := range leases {
		all := takenWebObservations(t, env, id)
		after := all[taken[id]:]
		// From the dip on: an observation at its replicas taken before it
		// is the deploy's end, seen late under load (the PostgreSQL phase
		// of CI run 85 took one after the deploy had ended).
		for len(after) > 0 && after[0] {
			after = after[1:]
		}
		var below, back int
		var seq []string
		for _, up := range after {
			if up {
				back++
			} else {
				below++
			}
			if s := fmt.Sprint(up); len(seq) == 0 || seq[len(seq)-1] != s {
				seq = append(seq, s)
			}
		}
		assert.Equal(t, []string{"false", "true"}, seq, "lease %s: the dip, then the return, each taken (web at its replicas, per observation taken: %v)", id, after)
		assert.LessOrEqual(t, below, 2, "lease %s: the dip taken once, and its Degraded verdict once (%v)", id, after)
		assert.Equal(t, 1, back, "lease %s: the return taken once (%v)", id, after)
	}
}

// takenWebObservations is, for each observation the lease's workflow took
// (accepted "observe" updates, over all its runs), whether its web
// service was at its replicas.
func takenWebObservations(t *testing.T, env *testenv.Env, id string) []bool {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	var out []bool
	it := env.Temporal.GetWorkflowHistory(context.Background(), api.DeployWorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		in := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput()
		if in.GetName() != api.UpdateObserve {
			continue
		}
		var o observe.Observation
		require.NoError(t, dc.FromPayloads(in.GetArgs(), &o))
		h := o.Services["web"]
		out = append(out, h.Available >= h.Desired)
	}
	return out
}

// waitNoPods waits until the lease's namespace has no pods: scaled back,
// its ReplicaSets make new ones.
func waitNoPods(t *testing.T, env *testenv.Env, id string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, 250*time.Millisecond, "lease "+id+": pods left after scaling to 0", func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(manifest.Namespace(id)).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		return len(pods.Items) == 0, strings.Join(names, " ")
	})
}
