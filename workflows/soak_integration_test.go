package workflows_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Guards issue 8 as a whole: 30 leases deployed at once, in 15 pairs whose
// lease and service names join to the same string ("<p>" / "x-y" and
// "<p>-x" / "y"), every other pair asking for one hostname, with pause,
// resume and abort sent to some rollouts. Every lease ends as its own inputs
// say, and nothing of one lease changes another's objects.
func TestSoakThirtyLeasesWithCollidingNames(t *testing.T) {
	dt := newDeployTest(t)
	// No safety-net ticks: nothing here changes a lease behind its
	// workflow's back, and 30 leases ticking kept the test's worker so busy
	// that a paused lease's workflow left its status query unanswered for
	// two minutes (CI).
	dt.healthInterval = 0
	ctx := context.Background()
	type lease struct {
		id, svc, owner, host string
		pair                 int
		second               bool
	}
	began := time.Now()
	phase := func(what string) { t.Logf("%s: %s in", what, time.Since(began).Round(time.Second)) }
	var leases []lease
	for p := 0; p < 15; p++ {
		a := lease{id: fmt.Sprintf("%s-%d", dt.lease, p), svc: "x-y", owner: fmt.Sprintf("a%d", p), pair: p}
		b := lease{id: fmt.Sprintf("%s-%d-x", dt.lease, p), svc: "y", owner: fmt.Sprintf("b%d", p), pair: p, second: true}
		a.host, b.host = fmt.Sprintf("a%d.%s.soak.example.com", p, dt.lease), fmt.Sprintf("b%d.%s.soak.example.com", p, dt.lease)
		if p%2 == 0 {
			b.host = a.host // one hostname for two owners: one of them gets it
		}
		leases = append(leases, a, b)
	}
	for _, l := range leases {
		dt.createLease(l.id, l.owner)
	}
	// The second lease of pairs 1, 7 and 13 (distinct hostnames) is paused
	// in the first round, and of pairs 3, 9 and 11 aborted in the second:
	// its partner, whose rollout had the same ID before, is not. In that
	// round only, its pods are slow enough to be caught mid-rollout (slow
	// in both, as before, the test waited 40s more three times).
	paused, aborted := map[string]bool{}, map[string]bool{}
	for _, p := range []int{1, 7, 13} {
		paused[leases[2*p+1].id] = true
	}
	for _, p := range []int{3, 9, 11} {
		aborted[leases[2*p+1].id] = true
	}
	manifestOf := func(l lease, image string, slowed map[string]bool) manifest.Manifest {
		if slowed[l.id] {
			return slow(web(l.id, l.svc, image, 2, l.host), "40s")
		}
		return slow(web(l.id, l.svc, image, 2, l.host), "2s")
	}
	rolloutOf := func(l lease) string { return api.RolloutWorkflowID(manifest.Namespace(l.id), l.svc) }
	// update sends a control to a lease's rollout; an attempt the server
	// does not answer within 15s (its workflow's worker busy with the
	// rest of the suite) is given up, to be tried again under the same
	// update ID: the server still holds the first, and a retry waits for
	// it rather than queueing another behind it (CI's PostgreSQL phase saw
	// eight 15s attempts time out in a row, each one a new update).
	update := func(l lease, name, id string) error {
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		h, err := dt.env.Temporal.UpdateWorkflow(actx, client.UpdateWorkflowOptions{
			WorkflowID: rolloutOf(l), UpdateName: name, UpdateID: id, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(actx, nil)
		}
		return err
	}
	// Each pause (and abort) is sent as soon as its lease's deploy is
	// taken, within its rollout's wait for pods that turn Ready after 40s.
	// (Sent once every deploy was taken, as before, a pause met a rollout
	// already complete: with 29 other deploys and the rest of the suite
	// beside it, the last deploy was taken more than 40s after the first.)
	// control sends a pause or an abort to a lease's rollout until it is
	// taken (the rollout may not have started yet, or, in the second
	// round, the first round's may still be the one under its ID).
	control := func(l lease, name, image string) error {
		seen := map[string]bool{}
		id := name + "-" + image + "-" + l.id
		for deadline := time.Now().Add(4 * time.Minute); time.Now().Before(deadline); time.Sleep(pollQuery) {
			err := update(l, name, id)
			if err == nil {
				return nil
			}
			seen[err.Error()] = true
		}
		return fmt.Errorf("%s %s: not within 4m (errors seen: %v)", name, l.id, seen)
	}
	// round deploys image to the leases deploys picks, at once, and sends
	// the leases in slowed the control update as soon as each one's deploy
	// is taken; the test's own goroutines only record.
	round := func(image string, slowed map[string]bool, update string, deploys func(lease) bool) {
		var wg sync.WaitGroup
		errs := make([]error, len(leases))
		for i, l := range leases {
			if !deploys(l) {
				continue
			}
			wg.Go(func() {
				if _, errs[i] = dt.tryDeploy(manifestOf(l, image, slowed)); errs[i] == nil && slowed[l.id] {
					errs[i] = control(l, update, image)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	}
	round("nginx:1.26", paused, api.UpdatePause, func(lease) bool { return true })

	phase("the first deploys taken, three paused")
	winners := map[int]string{}
	for _, l := range leases {
		if paused[l.id] {
			continue
		}
		st := dt.waitRevision(l.id, 1)
		switch {
		case l.pair%2 == 0 && st.Phase == api.PhaseFailed:
			assert.Contains(t, st.LastError, "HostnameConflict", l.id)
		default:
			assert.Equal(t, api.PhaseActive, st.Phase, "lease %s: %s", l.id, st.LastError)
			if l.pair%2 == 0 {
				assert.Empty(t, winners[l.pair], "pair %d: one hostname, two winners", l.pair)
				winners[l.pair] = l.id
			}
		}
	}
	for p := 0; p < 15; p += 2 {
		assert.NotEmpty(t, winners[p], "pair %d: exactly one lease gets the shared hostname", p)
	}
	for id := range paused {
		st, err := dt.status(id)
		require.NoError(t, err)
		assert.Equal(t, api.PhaseDeploying, st.Phase, "%s is paused", id)
	}
	phase("the first deploys ended, but the paused")
	// The three resumed at once, then waited for: a pause taken before its
	// rollout created anything leaves its pods 40s from Ready at the resume
	// (one resume and wait after another took two minutes).
	// A resume the loaded server did not complete within 15 s is sent
	// again (CI: "context deadline exceeded"); if the first one was taken
	// meanwhile, the next is refused as "not paused": resumed all the same.
	resume := func(l lease) error {
		timedOut := false
		for deadline := time.Now().Add(2 * time.Minute); ; {
			err := update(l, api.UpdateResume, "resume-"+l.id)
			switch {
			case err == nil:
				return nil
			case timedOut && strings.Contains(err.Error(), "the rollout is not paused"):
				return nil
			case strings.Contains(err.Error(), "context deadline exceeded") && time.Now().Before(deadline):
				timedOut = true
				continue
			}
			return err
		}
	}
	for _, p := range []int{1, 7, 13} {
		require.NoError(t, resume(leases[2*p+1]))
	}
	for _, p := range []int{1, 7, 13} {
		st := dt.waitRevision(leases[2*p+1].id, 1)
		assert.Equal(t, api.PhaseActive, st.Phase, "%s after resume: %s", leases[2*p+1].id, st.LastError)
	}

	phase("the paused resumed and ended")
	// Every Active lease updates to 1.27, the deploys at once, as in the
	// first round; the second leases of pairs 3, 9 and 11 abort theirs,
	// each as soon as its deploy is taken, within its pods' 40s. (One
	// deploy after another, then the aborts, took minutes under load.)
	active := map[string]bool{}
	for _, l := range leases {
		if st, err := dt.status(l.id); err == nil && st.Phase == api.PhaseActive {
			active[l.id] = true
		}
	}
	for _, p := range []int{3, 9, 11} {
		l := leases[2*p+1]
		require.True(t, active[l.id], "%s is Active", l.id)
	}
	round("nginx:1.27", aborted, api.UpdateAbort, func(l lease) bool { return active[l.id] })
	phase("the second deploys taken, three aborted")
	for _, l := range leases {
		if !active[l.id] {
			continue
		}
		st := dt.waitRevision(l.id, 2)
		want := "nginx:1.27"
		if aborted[l.id] {
			want = "nginx:1.26"
			assert.Equal(t, api.PhaseFailed, st.Phase, l.id)
			assert.Contains(t, st.LastError, api.ErrRolloutAborted, l.id)
		} else {
			assert.Equal(t, api.PhaseActive, st.Phase, "lease %s: %s", l.id, st.LastError)
		}
		_, available, images := dt.available(manifest.Namespace(l.id), l.svc)
		assert.Equal(t, int32(2), available, l.id)
		assert.Equal(t, int32(2), images[want], "lease %s runs %s", l.id, want)
	}
	phase("the second deploys ended")
	// Nothing of one lease is in another's namespace.
	for _, l := range leases {
		rss, err := dt.env.Kube.AppsV1().ReplicaSets(manifest.Namespace(l.id)).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, rs := range rss.Items {
			assert.Equal(t, l.id, rs.Labels[activities.LeaseLabel], "ReplicaSet %s/%s", rs.Namespace, rs.Name)
			assert.Equal(t, l.svc, rs.Labels[activities.ServiceLabel], "ReplicaSet %s/%s", rs.Namespace, rs.Name)
		}
	}
}
