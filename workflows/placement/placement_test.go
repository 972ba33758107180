package placement

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/internal/wftest"
)

// placementEnv runs PlacementWorkflow on the SDK's test environment with
// the placement activities faked: every cluster deploy succeeds, and is
// recorded with the test clock's time.
type placementEnv struct {
	*testsuite.TestWorkflowEnvironment
	// mu guards deploys and at: a wave's deploys run side by side, each
	// activity in a goroutine of its own. Unguarded, two appends raced and
	// one deploy went missing from the record (make unit-repeat, 1 in 5
	// runs; go test -race reported it every time).
	mu      sync.Mutex
	deploys []api.ClusterDeployInput
	at      []time.Time
	// firstDeploy, when set, is waited for by the first cluster deploy
	// before it returns: a test holds the placement inside its first
	// wave's deploy with it.
	firstDeploy chan struct{}
}

// oneService is a lease of one web service with one hostname.
func oneService(lease string) manifest.Manifest {
	return manifest.Manifest{Lease: lease, Services: []manifest.Service{{
		Name: "web", Image: "nginx:1.27",
		Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{"web.example.com"}}}}},
	}}}
}

func newPlacementEnv(t *testing.T, lastGood *manifest.Manifest) *placementEnv {
	var s testsuite.WorkflowTestSuite
	pe := &placementEnv{TestWorkflowEnvironment: wftest.NewEnv(&s)}
	pe.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: api.PlacementWorkflowID("shop")})
	pe.RegisterWorkflow(PlacementWorkflow)
	pe.RegisterActivityWithOptions(func(context.Context) ([]string, error) { return []string{"local", "eu-1"}, nil },
		activity.RegisterOptions{Name: api.ActivityListClusters})
	pe.RegisterActivityWithOptions(func(context.Context, api.ClusterRef) (api.ClusterState, error) {
		return api.ClusterState{LastGood: lastGood}, nil
	},
		activity.RegisterOptions{Name: api.ActivityReadCluster})
	pe.RegisterActivityWithOptions(func(context.Context, manifest.Manifest) error { return nil }, activity.RegisterOptions{Name: api.ActivityCheckPlacement})
	pe.RegisterActivityWithOptions(func(_ context.Context, in api.ClusterDeployInput) (api.ClusterDeployResult, error) {
		pe.mu.Lock()
		first := len(pe.deploys) == 0
		pe.mu.Unlock()
		if first && pe.firstDeploy != nil {
			<-pe.firstDeploy
		}
		pe.mu.Lock()
		defer pe.mu.Unlock()
		pe.deploys = append(pe.deploys, in)
		pe.at = append(pe.at, pe.Now())
		return api.ClusterDeployResult{Revision: int64(len(pe.deploys)), Outcome: "Succeeded", Succeeded: true}, nil
	}, activity.RegisterOptions{Name: api.ActivityDeployToCluster})
	return pe
}

func (pe *placementEnv) clusters() []string {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	var out []string
	for _, d := range pe.deploys {
		_, what, _ := strings.Cut(strings.TrimPrefix(d.Key, "placement:"), ":")
		out = append(out, d.Cluster+" "+what[strings.LastIndex(what, ":")+1:])
	}
	return out
}

func approvalPlacement() manifest.Manifest {
	m := oneService("shop")
	m.Placement = &manifest.Placement{Waves: []manifest.Wave{{Clusters: []string{"local"}, Approval: true}, {Clusters: []string{"eu-1"}}}}
	return m
}

// Issue 23.3: a wave with approval holds the next wave until an operator
// promotes the placement; a promote with no wave held is refused.
//
// The early promote is sent while wave 1's deploy is held open, so it
// always meets the placement before any wave is held. It once raced the
// placement to its held wave (a 1 ms callback fires on the wall clock
// only while an activity runs, so a fast run saw it fire at the hold and
// the promote was accepted: "a promote before any wave is held was
// accepted" in 10 of 10 batches of -count=20).
func TestAWaveWithApprovalHoldsTheNextUntilPromoted(t *testing.T) {
	pe := newPlacementEnv(t, nil)
	pe.firstDeploy = make(chan struct{})
	var release sync.Once
	done := func() { release.Do(func() { close(pe.firstDeploy) }) }
	pe.RegisterDelayedCallback(func() {
		pe.UpdateWorkflow(api.UpdatePromote, "early", &testsuite.TestUpdateCallback{
			OnAccept:   func() { t.Error("a promote before any wave is held was accepted"); done() },
			OnReject:   func(err error) { assert.Contains(t, err.Error(), "no wave is held"); done() },
			OnComplete: func(any, error) {},
		})
	}, time.Millisecond)
	var held api.PlacementStatus
	var promoted time.Time
	pe.RegisterDelayedCallback(func() {
		promoted = pe.Now()
		v, err := pe.QueryWorkflow(api.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&held))
		assert.Equal(t, []string{"local deploy"}, pe.clusters(), "wave 2 waits for the approval")
		pe.UpdateWorkflow(api.UpdatePromote, "approve", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("promote refused: %v", err) }, OnComplete: func(any, error) {},
		})
	}, 2*time.Hour)
	pe.ExecuteWorkflow(PlacementWorkflow, api.PlacementInput{Manifest: approvalPlacement()})
	require.NoError(t, pe.GetWorkflowError())
	var st api.PlacementStatus
	require.NoError(t, pe.GetWorkflowResult(&st))

	assert.Equal(t, api.WaveHeld, held.Waves[0].Phase)
	assert.Equal(t, "awaiting approval: deployflow promote shop", held.Waves[0].Gate)
	assert.Equal(t, plan.Running, held.Tree.Search(plan.OpApproval, "wave 1").State)
	assert.Equal(t, api.PlacementSucceeded, st.Phase)
	assert.Equal(t, []string{"local deploy", "eu-1 deploy"}, pe.clusters())
	assert.False(t, pe.at[1].Before(promoted), "wave 2 deployed only once promoted (at %s, promoted at %s)", pe.at[1], promoted)
	assert.Equal(t, plan.Done, st.Tree.Search(plan.OpApproval, "wave 1").State)
}

// Issue 23.4: an abort while a wave awaits approval returns the clusters
// that moved to their last-known-good manifest and never starts the next
// wave.
func TestAnAbortWhileAwaitingApprovalReturnsTheMovedClusters(t *testing.T) {
	good := oneService("shop")
	good.Services[0].Image = "nginx:1.26"
	pe := newPlacementEnv(t, &good)
	pe.RegisterDelayedCallback(func() {
		pe.UpdateWorkflow(api.UpdateAbort, "abort", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("abort refused: %v", err) }, OnComplete: func(any, error) {},
		})
	}, time.Hour)
	pe.ExecuteWorkflow(PlacementWorkflow, api.PlacementInput{Manifest: approvalPlacement()})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, pe.GetWorkflowError(), &appErr)
	assert.Equal(t, api.ErrPlacement, appErr.Type())
	var st api.PlacementStatus
	require.NoError(t, appErr.Details(&st))
	assert.Equal(t, api.PlacementAborted, st.Phase)
	assert.Equal(t, []string{"local deploy", "local revert"}, pe.clusters(), "wave 2 never deployed")
	assert.Equal(t, "nginx:1.26", pe.deploys[1].Manifest.Services[0].Image, "returned to the last-known-good manifest")
	assert.Equal(t, api.ClusterReverted, st.Waves[0].Clusters[0].Phase)
	assert.Equal(t, api.ClusterWaiting, st.Waves[1].Clusters[0].Phase)
	assert.Equal(t, plan.Skipped, st.Tree.Search(plan.OpDeployCluster, "eu-1").State)
}

// Found in review: an abort that arrived while the last wave deployed was
// lost (the placement ended Succeeded). It returns the clusters that
// moved, the last wave's too.
func TestAnAbortDuringTheLastWaveReturnsItsClusters(t *testing.T) {
	good := oneService("shop")
	good.Services[0].Image = "nginx:1.26"
	var s testsuite.WorkflowTestSuite
	env := wftest.NewEnv(&s)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: api.PlacementWorkflowID("shop")})
	env.RegisterWorkflow(PlacementWorkflow)
	env.RegisterActivityWithOptions(func(context.Context) ([]string, error) { return []string{"local"}, nil }, activity.RegisterOptions{Name: api.ActivityListClusters})
	env.RegisterActivityWithOptions(func(context.Context, api.ClusterRef) (api.ClusterState, error) {
		return api.ClusterState{LastGood: &good}, nil
	}, activity.RegisterOptions{Name: api.ActivityReadCluster})
	env.RegisterActivityWithOptions(func(context.Context, manifest.Manifest) error { return nil }, activity.RegisterOptions{Name: api.ActivityCheckPlacement})
	deploy := func(context.Context, api.ClusterDeployInput) (api.ClusterDeployResult, error) {
		return api.ClusterDeployResult{}, nil
	}
	env.RegisterActivityWithOptions(deploy, activity.RegisterOptions{Name: api.ActivityDeployToCluster})
	var keys []string
	env.OnActivity(api.ActivityDeployToCluster, mock.Anything, mock.Anything).After(time.Minute).Return(
		func(_ context.Context, in api.ClusterDeployInput) (api.ClusterDeployResult, error) {
			keys = append(keys, in.Key[strings.LastIndex(in.Key, ":")+1:])
			return api.ClusterDeployResult{Revision: int64(len(keys)), Outcome: "Succeeded", Succeeded: true}, nil
		})
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdateAbort, "abort", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("abort refused: %v", err) }, OnComplete: func(any, error) {},
		})
	}, 30*time.Second) // the one wave's deploy takes a minute
	m := oneService("shop")
	m.Placement = &manifest.Placement{Waves: []manifest.Wave{{Clusters: []string{"local"}}}}
	env.ExecuteWorkflow(PlacementWorkflow, api.PlacementInput{Manifest: m})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, env.GetWorkflowError(), &appErr)
	var st api.PlacementStatus
	require.NoError(t, appErr.Details(&st))
	assert.Equal(t, api.PlacementAborted, st.Phase)
	assert.Equal(t, []string{"deploy", "revert"}, keys)
	assert.Equal(t, api.ClusterReverted, st.Waves[0].Clusters[0].Phase)
}

// interruptEnv is a placement over local and eu-1 whose deploy to the
// cluster slow takes ten hours, to failing fails after a minute, to any
// other takes a minute; returns are immediate. It records every
// DeployToCluster call's input and time.
func interruptEnv(t *testing.T, good *manifest.Manifest, slow, failing string) (*testsuite.TestWorkflowEnvironment, *[]api.ClusterDeployInput, *[]time.Time) {
	var s testsuite.WorkflowTestSuite
	env := wftest.NewEnv(&s)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: api.PlacementWorkflowID("shop")})
	env.RegisterWorkflow(PlacementWorkflow)
	env.RegisterActivityWithOptions(func(context.Context) ([]string, error) { return []string{"local", "eu-1"}, nil }, activity.RegisterOptions{Name: api.ActivityListClusters})
	env.RegisterActivityWithOptions(func(context.Context, api.ClusterRef) (api.ClusterState, error) {
		return api.ClusterState{LastGood: good}, nil
	}, activity.RegisterOptions{Name: api.ActivityReadCluster})
	env.RegisterActivityWithOptions(func(context.Context, manifest.Manifest) error { return nil }, activity.RegisterOptions{Name: api.ActivityCheckPlacement})
	env.RegisterActivityWithOptions(func(context.Context, api.ClusterDeployInput) (api.ClusterDeployResult, error) {
		return api.ClusterDeployResult{}, nil
	},
		activity.RegisterOptions{Name: api.ActivityDeployToCluster})
	var calls []api.ClusterDeployInput
	var at []time.Time
	record := func(_ context.Context, in api.ClusterDeployInput) (api.ClusterDeployResult, error) {
		calls, at = append(calls, in), append(at, env.Now())
		return api.ClusterDeployResult{Revision: int64(len(calls)), Outcome: "Succeeded", Succeeded: true}, nil
	}
	isSlow := func(in api.ClusterDeployInput) bool { return in.Cluster == slow && in.IfLast == "" }
	env.OnActivity(api.ActivityDeployToCluster, mock.Anything, mock.MatchedBy(func(in api.ClusterDeployInput) bool { return in.Cluster == failing && in.IfLast == "" })).
		After(time.Minute).Return(api.ClusterDeployResult{Revision: 7, Outcome: "Failed: progress deadline exceeded"}, nil)
	env.OnActivity(api.ActivityDeployToCluster, mock.Anything, mock.MatchedBy(isSlow)).After(10 * time.Hour).Return(record)
	env.OnActivity(api.ActivityDeployToCluster, mock.Anything, mock.MatchedBy(func(in api.ClusterDeployInput) bool { return in.IfLast != "" })).Return(record)
	env.OnActivity(api.ActivityDeployToCluster, mock.Anything, mock.Anything).After(time.Minute).Return(record)
	return env, &calls, &at
}

func placementStatusOf(t *testing.T, env *testsuite.TestWorkflowEnvironment) api.PlacementStatus {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, env.GetWorkflowError(), &appErr)
	require.Equal(t, api.ErrPlacement, appErr.Type())
	var st api.PlacementStatus
	require.NoError(t, appErr.Details(&st))
	return st
}

// Issue 23.4: an abort while a wave's deploys are in flight interrupts
// them (a canary's hours-long pause is not waited out) and returns those
// clusters, with the ones that moved before, in reverse wave order. Each
// return is guarded by the placement's deploy's key, so it supersedes the
// interrupted deploy and nothing else. Before the placement-interrupts
// gate the abort waited for the wave's deploys to end.
func TestAnAbortInterruptsAWavesDeploysInFlightAndReturnsThem(t *testing.T) {
	good := oneService("shop")
	good.Services[0].Image = "nginx:1.26"
	env, calls, at := interruptEnv(t, &good, "eu-1", "")
	start := env.Now()
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.UpdateAbort, "abort", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("abort refused: %v", err) }, OnComplete: func(any, error) {},
		})
	}, time.Hour) // wave 2's deploy is in flight
	m := oneService("shop")
	m.Placement = &manifest.Placement{Waves: []manifest.Wave{{Clusters: []string{"local"}}, {Clusters: []string{"eu-1"}}}}
	env.ExecuteWorkflow(PlacementWorkflow, api.PlacementInput{Manifest: m})
	st := placementStatusOf(t, env)

	assert.Equal(t, api.PlacementAborted, st.Phase)
	var returns []string
	for i, c := range *calls {
		if c.IfLast == "" {
			assert.NotEqual(t, "eu-1", c.Cluster, "eu-1's ten-hour deploy was interrupted before it ended")
			continue
		}
		assert.Less(t, (*at)[i].Sub(start), 2*time.Hour, "returned at the abort, not once the ten-hour deploy ended")
		returns = append(returns, c.Cluster)
		assert.Equal(t, "nginx:1.26", c.Manifest.Services[0].Image, "returned to the last-known-good manifest")
		assert.True(t, strings.HasSuffix(c.IfLast, ":"+c.Cluster+":deploy"), "the return to %s is guarded by the placement's deploy there: %s", c.Cluster, c.IfLast)
	}
	assert.Equal(t, []string{"eu-1", "local"}, returns, "the interrupted cluster, then the one that moved: reverse wave order")
	assert.Equal(t, api.ClusterReverted, st.Waves[1].Clusters[0].Phase, "%+v", st.Waves[1])
	assert.Equal(t, api.WaveReverted, st.Waves[1].Phase)
	assert.Equal(t, plan.Failed, st.Tree.Search(plan.OpDeployCluster, "eu-1").State)
	assert.Len(t, st.Tree.ByOp(plan.OpRevert), 2)
}

// Issue 23.4: a cluster whose deploy fails stops its wave: the wave's
// other deploys in flight are interrupted and returned, instead of the
// placement waiting for them before it returns anything.
func TestAFailedClusterInterruptsTheRestOfItsWave(t *testing.T) {
	good := oneService("shop")
	good.Services[0].Image = "nginx:1.26"
	env, calls, at := interruptEnv(t, &good, "eu-1", "local")
	start := env.Now()
	m := oneService("shop")
	m.Placement = &manifest.Placement{Waves: []manifest.Wave{{Clusters: []string{"local", "eu-1"}}}}
	env.ExecuteWorkflow(PlacementWorkflow, api.PlacementInput{Manifest: m})
	st := placementStatusOf(t, env)

	assert.Equal(t, api.PlacementFailed, st.Phase)
	assert.Contains(t, st.Error, "the deploy failed in cluster [local]")
	assert.Equal(t, api.ClusterFailed, st.Waves[0].Clusters[0].Phase, "local failed: its lease workflow returned it itself")
	assert.Equal(t, api.ClusterReverted, st.Waves[0].Clusters[1].Phase, "eu-1, interrupted, is returned")
	require.NotEmpty(t, *calls)
	last := (*calls)[len(*calls)-1]
	assert.Equal(t, "eu-1", last.Cluster)
	assert.NotEmpty(t, last.IfLast)
	assert.Less(t, (*at)[len(*at)-1].Sub(start), time.Hour, "returned once local failed, not after eu-1's ten hours")
}

// A placement started by hand under another ID than placement-<lease> is
// refused before anything deploys: a second placement of the same lease
// would deploy beside the first. Before the placement-interrupts gate any
// ID ran.
func TestAPlacementRunsOnlyUnderItsLeasesID(t *testing.T) {
	// ReplayId is the SDK replayer's: let through only while replaying.
	for _, id := range []string{"my-own-placement", "ReplayId"} {
		pe := newPlacementEnv(t, nil)
		pe.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
		pe.ExecuteWorkflow(PlacementWorkflow, api.PlacementInput{Manifest: approvalPlacement()})
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, pe.GetWorkflowError(), &appErr, id)
		assert.Equal(t, api.ErrInvalidInput, appErr.Type())
		assert.Contains(t, appErr.Error(), "workflow ID: lease shop's placement runs as workflow placement-shop, not "+id)
		assert.Empty(t, pe.deploys, "nothing deployed")
	}
}

// Issue 23.3: a wave's Job analysis runs the Job in each cluster of the
// wave, on that cluster's task queue (its activities reach that cluster
// only), and one cluster's failed Job fails the wave: the clusters that
// moved are returned.
func TestAWavesJobRunsInEachOfItsClustersAndOneFailureFailsIt(t *testing.T) {
	good := oneService("shop")
	good.Services[0].Image = "nginx:1.26"
	pe := newPlacementEnv(t, &good)
	ran := map[string]string{} // task queue → the Job's namespace
	var mu sync.Mutex          // the wave's Jobs run side by side
	pe.RegisterActivityWithOptions(func(ctx context.Context, in activities.JobCheckInput) (*activities.Measurement, error) {
		q := activity.GetInfo(ctx).TaskQueue
		mu.Lock()
		ran[q] = in.Namespace
		mu.Unlock()
		if strings.HasSuffix(q, "@eu-1") {
			return &activities.Measurement{Phase: analysis.Failed, Message: "job " + in.Name + " failed"}, nil
		}
		return &activities.Measurement{Phase: analysis.Successful, Message: "job " + in.Name + " succeeded"}, nil
	}, activity.RegisterOptions{Name: "RunJob"})
	m := oneService("shop")
	m.Placement = &manifest.Placement{Waves: []manifest.Wave{{Clusters: []string{"local", "eu-1"},
		Analysis: &manifest.Analysis{Job: &manifest.JobCheck{Image: "busybox:1.36"}}}}}
	pe.ExecuteWorkflow(PlacementWorkflow, api.PlacementInput{Manifest: m})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, pe.GetWorkflowError(), &appErr)
	var st api.PlacementStatus
	require.NoError(t, appErr.Details(&st))

	assert.Equal(t, map[string]string{"default-test-taskqueue": "lease-shop", "default-test-taskqueue@eu-1": "lease-shop"}, ran,
		"the Job ran once in each cluster, by that cluster's activities")
	assert.Equal(t, api.PlacementFailed, st.Phase)
	assert.Contains(t, st.Error, "wave 1: analysis failed: analysis job busybox:1.36: cluster local: job placement-check-")
	assert.Contains(t, st.Error, "cluster eu-1: job placement-check-")
	calls := pe.clusters()
	require.Len(t, calls, 4)
	assert.ElementsMatch(t, []string{"local deploy", "eu-1 deploy"}, calls[:2], "the wave deploys in parallel")
	assert.ElementsMatch(t, []string{"local revert", "eu-1 revert"}, calls[2:], "then both return, in parallel")
}
