package stateful

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/wftest"
	"github.com/deployflow/deployflow/k8s/statefulset"
)

// The stateful rollout's decisions against a model of the StatefulSet
// controller (OrderedReady, RollingUpdate): a pod deleted is made again at
// the update revision at or above the partition, at the current revision
// below it; with any pod not Ready, nothing is replaced; once every pod runs
// the update revision and is Ready, it is the current revision. Each
// activity reads or writes the model; the live tests run the same on the
// stack's own controller (workflows/statefulset_integration_test.go).

// fakeStatefulSet is the model: db, its replicas, partition, revisions
// ("db-" + image) and pods.
type fakeStatefulSet struct {
	mu                sync.Mutex
	replicas          int32
	partition         int32
	update, current   string
	pods              map[int32]statefulset.Pod
	neverReady        map[string]bool // revisions whose pods never turn Ready
	staleOnce         bool            // the apply's read is of a spec not yet observed
	staleRev          string          // the update revision such a read shows
	deleted, reverted []string
	staleRevert       bool          // a return's read is of the spec before it, pods and all
	slow              int           // passes a new pod takes to turn Ready
	starting          map[int32]int // passes each starting pod has left
}

func newFakeStatefulSet(image string) *fakeStatefulSet {
	f := &fakeStatefulSet{replicas: 2, partition: 0, update: "db-" + image, current: "db-" + image,
		pods: map[int32]statefulset.Pod{}, neverReady: map[string]bool{}, starting: map[int32]int{}}
	f.reconcile()
	return f
}

// reconcile is one pass of the controller.
func (f *fakeStatefulSet) reconcile() {
	for ord := range f.replicas {
		if _, ok := f.pods[ord]; !ok {
			rev := f.current
			if ord >= f.partition {
				rev = f.update
			}
			ready := !f.neverReady[rev]
			if ready && f.slow > 0 {
				ready, f.starting[ord] = false, f.slow
			}
			f.pods[ord] = statefulset.Pod{Ordinal: ord, Revision: rev, Ready: ready, Available: ready}
		}
	}
	for ord, left := range f.starting {
		if left--; left > 0 {
			f.starting[ord] = left
			continue
		}
		delete(f.starting, ord)
		p := f.pods[ord]
		p.Ready, p.Available = true, true
		f.pods[ord] = p
	}
	for _, p := range f.pods {
		if !p.Ready {
			return // OrderedReady: a pod not Ready holds every replacement
		}
	}
	for ord := f.replicas - 1; ord >= f.partition; ord-- {
		if f.pods[ord].Revision != f.update {
			delete(f.pods, ord) // made again at the update revision by the next pass
			return
		}
	}
	f.current = f.update
}

func (f *fakeStatefulSet) state() *activities.StatefulSetState {
	st := &activities.StatefulSetState{Observed: statefulset.Observed{Name: "db", Replicas: f.replicas, Partition: f.partition,
		UpdateRevision: f.update, CurrentRevision: f.current}}
	for ord := range f.replicas {
		if p, ok := f.pods[ord]; ok {
			st.Pods = append(st.Pods, p)
		}
	}
	if f.staleRev != "" {
		// The status of before the write: its update revision the old one.
		st.Stale, st.UpdateRevision, f.staleRev = true, f.staleRev, ""
		if !f.staleRevert {
			st.Pods = nil
		}
	}
	return st
}

func (f *fakeStatefulSet) read() *activities.StatefulSetState {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reconcile()
	return f.state()
}

// podRevisions is every pod's revision and readiness, by ordinal.
func (f *fakeStatefulSet) podRevisions() map[int32]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int32]string{}
	for ord, p := range f.pods {
		out[ord] = fmt.Sprintf("%s ready=%t", p.Revision, p.Ready)
	}
	return out
}

// unready makes the running pods fail their readiness (a crash after the
// rollout completed), and their revision's pods never start again.
func (f *fakeStatefulSet) unready() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ord, p := range f.pods {
		p.Ready, p.Available = false, false
		f.pods[ord] = p
		f.neverReady[p.Revision] = true
	}
}

// env is a test environment whose activities act on f; the rollout runs as
// the child of lease shop's workflow (as only a lease's starts one).
func (f *fakeStatefulSet) env() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := wftest.NewEnv(&s)
	env.SetStartTime(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	env.RegisterWorkflowWithOptions(StatefulSetRolloutWorkflow, workflow.RegisterOptions{Name: api.StatefulSetRolloutWorkflow})
	env.RegisterWorkflowWithOptions(leaseParent, workflow.RegisterOptions{Name: "LeaseParent"})
	env.SetStartWorkflowOptions(clientOptions())
	a := &activities.Activities{}
	env.RegisterActivity(a)
	env.OnActivity(a.ApplyStatefulSet, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ApplyStatefulSetInput) (*activities.StatefulSetState, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rev := "db-" + in.StatefulSet.Spec.Template.Spec.Containers[0].Image; rev != f.update {
				if f.staleOnce {
					f.staleRev, f.staleOnce = f.update, false
				}
				f.update, f.partition = rev, f.replicas
			}
			return f.state(), nil
		}).Maybe()
	env.OnActivity(a.ReadStatefulSet, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.StatefulSetRef) (*activities.StatefulSetState, error) {
			return f.read(), nil
		}).Maybe()
	env.OnActivity(a.SetPartition, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SetPartitionInput) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.partition = in.Partition
			return nil
		}).Maybe()
	env.OnActivity(a.DeleteStuckPods, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DeleteStuckPodsInput) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, ord := range in.Ordinals {
				if p, ok := f.pods[ord]; ok && !p.Ready && p.Revision != in.Revision {
					delete(f.pods, ord)
					f.deleted = append(f.deleted, fmt.Sprintf("db-%d %s", ord, p.Revision))
				}
			}
			return nil
		}).Maybe()
	env.OnActivity(a.RevertStatefulSet, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RevertStatefulSetInput) (*activities.StatefulSetState, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.staleRevert {
				f.staleRev = f.update
			}
			f.update = in.Revision
			f.reverted = append(f.reverted, in.Revision)
			return f.state(), nil
		}).Maybe()
	env.OnActivity(a.WaitStatefulSetStep, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.WaitStatefulSetStepInput) (*activities.StatefulSetState, error) {
			return f.read(), nil
		}).After(time.Second).Maybe()
	return env
}

// leaseParent stands for lease shop's workflow: it starts the rollout as
// its child under the service's rollout ID.
func leaseParent(ctx workflow.Context, in api.StatefulSetRolloutInput) (*api.RolloutResult, error) {
	ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: api.RolloutWorkflowID(in.Namespace, in.Service)})
	var res api.RolloutResult
	err := workflow.ExecuteChildWorkflow(ctx, api.StatefulSetRolloutWorkflow, in).Get(ctx, &res)
	return &res, err
}

func dbInput(t *testing.T, image string) api.StatefulSetRolloutInput {
	t.Helper()
	two := int32(2)
	m := manifest.Manifest{Lease: "shop", Services: []manifest.Service{{Name: "db", Image: image, Replicas: &two,
		Volumes: []manifest.Volume{{Name: "data", Size: "1Gi", MountPath: "/data", Persistent: true, Class: "local"}}}}}
	sts, err := m.WithDefaults().StatefulSet("db")
	require.NoError(t, err)
	return api.StatefulSetRolloutInput{Namespace: manifest.Namespace("shop"), Service: "db", StatefulSet: *sts, ProgressDeadlineSeconds: 60}
}

// rollOut runs the rollout of in to its end on f, and returns its error.
func rollOut(f *fakeStatefulSet, in api.StatefulSetRolloutInput, during func(env *testsuite.TestWorkflowEnvironment)) error {
	env := f.env()
	if during != nil {
		during(env)
	}
	env.ExecuteWorkflow("LeaseParent", in)
	return env.GetWorkflowError()
}

func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

// Guards the review's finding: a lease's return to its last-known-good
// manifest after a rollout that completed, whose pods then stopped being
// Ready, deleted them at any ordinal while the partition still held them,
// so the controller made them again at the current revision, the failed
// one, forever; at the deadline it then wrote the failed revision back as
// the "previous" one. Now the return's partition first goes down to them,
// they come back at the last-known-good revision, and nothing is written
// back.
func TestALeasesReturnAfterACompletedRolloutBringsBackTheLastKnownGoodRevision(t *testing.T) {
	f := newFakeStatefulSet("postgres:16")
	require.NoError(t, rollOut(f, dbInput(t, "postgres:17"), nil))
	require.Equal(t, map[int32]string{0: "db-postgres:17 ready=true", 1: "db-postgres:17 ready=true"}, f.podRevisions())

	f.unready()
	back := dbInput(t, "postgres:16")
	back.Revert = true
	require.NoError(t, rollOut(f, back, nil))
	assert.Equal(t, map[int32]string{0: "db-postgres:16 ready=true", 1: "db-postgres:16 ready=true"}, f.podRevisions(),
		"every ordinal runs the last-known-good revision, Ready")
	assert.Empty(t, f.reverted, "a lease's return writes no revision back: it is the way back")
	assert.ElementsMatch(t, []string{"db-1 db-postgres:17", "db-0 db-postgres:17"}, f.deleted, "each failed pod deleted once")
}

// Guards the review's finding that autoRollback: false was ignored: at the
// deadline the rollout fails and leaves the pods where they are.
func TestWithoutAutoRollbackTheDeadlineLeavesThePodsAsTheyAre(t *testing.T) {
	f := newFakeStatefulSet("postgres:16")
	f.neverReady["db-postgres:17"] = true
	err := rollOut(f, dbInput(t, "postgres:17"), nil)
	require.Error(t, err)
	assert.Equal(t, api.ErrProgressDeadlineExceeded, errorType(err), "%v", err)
	assert.Contains(t, err.Error(), "autoRollback is off: the pods stay as they are")
	assert.Empty(t, f.reverted)
	assert.Equal(t, map[int32]string{0: "db-postgres:16 ready=true", 1: "db-postgres:17 ready=false"}, f.podRevisions())

	f = newFakeStatefulSet("postgres:16")
	f.neverReady["db-postgres:17"] = true
	in := dbInput(t, "postgres:17")
	in.AutoRollback = true
	err = rollOut(f, in, nil)
	assert.Equal(t, api.ErrProgressDeadlineExceeded, errorType(err), "%v", err)
	assert.Contains(t, err.Error(), "every ordinal runs revision db-postgres:16 again")
	assert.Equal(t, map[int32]string{0: "db-postgres:16 ready=true", 1: "db-postgres:16 ready=true"}, f.podRevisions())
}

// Guards the review's finding that an abort right after the apply, whose
// read still showed the old update revision (the controller had not yet
// observed the new template), said "nothing to return to" and left the
// new template in the spec.
func TestAnAbortRightAfterTheApplyReturnsToThePreviousRevision(t *testing.T) {
	f := newFakeStatefulSet("postgres:16")
	f.staleOnce = true
	in := dbInput(t, "postgres:17")
	in.Steps = []manifest.CanaryStep{{Pause: &manifest.Pause{}}}
	err := rollOut(f, in, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			require.NoError(t, env.UpdateWorkflowByID(api.RolloutWorkflowID(in.Namespace, "db"), api.UpdateAbort, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("abort refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {}}))
		}, time.Second)
	})
	assert.Equal(t, api.ErrRolloutAborted, errorType(err), "%v", err)
	assert.Contains(t, err.Error(), "every ordinal runs revision db-postgres:16 again")
	assert.Equal(t, []string{"db-postgres:16"}, f.reverted, "the previous template written back")
}

// A return that cannot finish (the previous revision's pods do not start
// either) says so at its own deadline, not that every ordinal is back.
func TestAReturnThatHitsItsOwnDeadlineSaysItDidNotFinish(t *testing.T) {
	f := newFakeStatefulSet("postgres:16")
	f.neverReady["db-postgres:17"] = true
	in := dbInput(t, "postgres:17")
	in.AutoRollback = true
	err := rollOut(f, in, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.neverReady["db-postgres:16"] = true // the node went bad
		}, 30*time.Second)
	})
	assert.Equal(t, api.ErrProgressDeadlineExceeded, errorType(err), "%v", err)
	assert.Contains(t, err.Error(), "the return to revision db-postgres:16 did not finish")
	assert.NotContains(t, err.Error(), "again")
	assert.True(t, slices.Contains(f.reverted, "db-postgres:16"))
}

func clientOptions() client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: api.DeployWorkflowID("shop")}
}

// Issue 39.2: a stateful canary's analysis step judges the ordinals its
// setWeight released: failed, the rollout aborts and they return to the
// previous revision; inconclusive, it holds until promoted.
func TestAStatefulCanarysAnalysisAbortsOnFailureAndHoldsWhenInconclusive(t *testing.T) {
	fifty := int32(50)
	job := &manifest.Analysis{Job: &manifest.JobCheck{Image: "ghcr.io/acme/smoke:1"}}
	canary := func(image string) api.StatefulSetRolloutInput {
		in := dbInput(t, image)
		in.Steps = []manifest.CanaryStep{{SetWeight: &fifty}, {Analysis: job}}
		return in
	}
	withJob := func(phase analysis.Phase, seen *[]map[int32]string, f *fakeStatefulSet) func(env *testsuite.TestWorkflowEnvironment) {
		return func(env *testsuite.TestWorkflowEnvironment) {
			env.OnActivity((&activities.Activities{}).RunJob, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.JobCheckInput) (*activities.Measurement, error) {
					*seen = append(*seen, f.podRevisions())
					return &activities.Measurement{Phase: phase, Message: "exit code 3"}, nil
				})
		}
	}

	f := newFakeStatefulSet("postgres:16")
	var seen []map[int32]string
	err := rollOut(f, canary("postgres:17"), withJob(analysis.Failed, &seen, f))
	assert.Equal(t, api.ErrRolloutAborted, errorType(err), "%v", err)
	assert.Contains(t, err.Error(), "analysis failed")
	require.Len(t, seen, 1)
	assert.Equal(t, map[int32]string{0: "db-postgres:16 ready=true", 1: "db-postgres:17 ready=true"}, seen[0], "measured with the canary at one pod")
	assert.Equal(t, map[int32]string{0: "db-postgres:16 ready=true", 1: "db-postgres:16 ready=true"}, f.podRevisions(), "db-1 back on the previous revision")

	f = newFakeStatefulSet("postgres:16")
	seen = nil
	in := canary("postgres:17")
	err = rollOut(f, in, func(env *testsuite.TestWorkflowEnvironment) {
		withJob(analysis.Inconclusive, &seen, f)(env)
		env.RegisterDelayedCallback(func() {
			var st api.RolloutStatus
			v, err := env.QueryWorkflowByID(api.RolloutWorkflowID(in.Namespace, "db"), api.QueryStatus)
			require.NoError(t, err)
			require.NoError(t, v.Get(&st))
			assert.Contains(t, st.Message, "analysis inconclusive", "the status says why it holds")
			require.NoError(t, env.UpdateWorkflowByID(api.RolloutWorkflowID(in.Namespace, "db"), api.UpdatePromote, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("promote refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {}}, api.PromoteRequest{}))
		}, time.Hour)
	})
	require.NoError(t, err)
	assert.Equal(t, map[int32]string{0: "db-postgres:17 ready=true", 1: "db-postgres:17 ready=true"}, f.podRevisions(), "promoted: every ordinal on the new revision")
}

// Issue 39.2: a stateful canary's background analysis is measured while
// its steps run: failed, the rollout aborts in its pause and the released
// ordinal returns to the previous revision.
func TestAStatefulCanarysFailingBackgroundAnalysisAbortsIt(t *testing.T) {
	fifty := int32(50)
	in := dbInput(t, "postgres:17")
	in.Steps = []manifest.CanaryStep{{SetWeight: &fifty}, {Pause: &manifest.Pause{}}}
	in.Background = &manifest.Analysis{Prometheus: &manifest.PrometheusQuery{Query: "errors"}, SuccessCondition: "result < 1", Interval: "10s"}
	f := newFakeStatefulSet("postgres:16")
	measured := 0
	err := rollOut(f, in, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity((&activities.Activities{}).MeasurePrometheus, mock.Anything, mock.Anything).Return(
			func(context.Context, activities.MeasureInput) (*activities.Measurement, error) {
				measured++
				phase := analysis.Successful
				if measured >= 3 {
					phase = analysis.Failed
				}
				return &activities.Measurement{Phase: phase, Message: "errors"}, nil
			})
	})
	assert.Equal(t, api.ErrRolloutAborted, errorType(err), "%v", err)
	assert.Contains(t, err.Error(), "background analysis failed")
	assert.Equal(t, 3, measured, "measured until it failed, interval apart")
	assert.Equal(t, map[int32]string{0: "db-postgres:16 ready=true", 1: "db-postgres:16 ready=true"}, f.podRevisions(), "db-1 back on the previous revision")
}

// Guards the review's finding: an inconclusive background verdict reached
// in the canary's last step did not hold the rollout: the rest of the
// ordinals were released as if it had passed. Now it holds before them,
// as before any step, until promoted.
func TestAnInconclusiveBackgroundVerdictInTheLastStepHoldsTheRest(t *testing.T) {
	fifty := int32(50)
	in := dbInput(t, "postgres:17")
	in.Steps = []manifest.CanaryStep{{SetWeight: &fifty}, {Pause: &manifest.Pause{Duration: "5m"}}}
	in.Background = &manifest.Analysis{Prometheus: &manifest.PrometheusQuery{Query: "errors"}, SuccessCondition: "result < 1", Interval: "10s"}
	f := newFakeStatefulSet("postgres:16")
	var held api.RolloutStatus
	var during map[int32]string
	measured := 0
	err := rollOut(f, in, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity((&activities.Activities{}).MeasurePrometheus, mock.Anything, mock.Anything).Return(
			func(context.Context, activities.MeasureInput) (*activities.Measurement, error) {
				// Inconclusive from the tenth measurement: in the pause, the
				// last step.
				if measured++; measured < 10 {
					return &activities.Measurement{Phase: analysis.Successful, Message: "0 errors"}, nil
				}
				return &activities.Measurement{Phase: analysis.Inconclusive, Message: "no samples"}, nil
			})
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflowByID(api.RolloutWorkflowID(in.Namespace, "db"), api.QueryStatus)
			if !assert.NoError(t, err) || !assert.NoError(t, v.Get(&held)) {
				return
			}
			during = f.podRevisions()
			require.NoError(t, env.UpdateWorkflowByID(api.RolloutWorkflowID(in.Namespace, "db"), api.UpdatePromote, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("promote refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {}}, api.PromoteRequest{}))
		}, time.Hour)
	})
	require.NoError(t, err)
	assert.Contains(t, held.Message, "background analysis inconclusive", "the status says why it holds")
	assert.Equal(t, map[int32]string{0: "db-postgres:16 ready=true", 1: "db-postgres:17 ready=true"}, during, "held with the canary at one pod")
	assert.Equal(t, map[int32]string{0: "db-postgres:17 ready=true", 1: "db-postgres:17 ready=true"}, f.podRevisions(), "promoted: every ordinal on the new revision")
}

// Guards the review's finding: a pause (a pause step without end, or a
// rollout paused by an operator) waited up to six hours at a time while
// its background analysis kept adding to the history, so a history long
// enough to continue as new kept growing. Now a long history ends the wait
// and the run continues as new, where it was.
func TestAPausedStatefulCanaryContinuesAsNewWhenItsHistoryIsLong(t *testing.T) {
	fifty := int32(50)
	for _, tc := range []struct {
		name  string
		carry carry
	}{
		{"in a pause step", carry{StepIndex: 1}},
		{"paused by an operator", carry{StepIndex: 0, Paused: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := dbInput(t, "postgres:17")
			in.Steps = []manifest.CanaryStep{{SetWeight: &fifty}, {Pause: &manifest.Pause{}}}
			in.Background = &manifest.Analysis{Prometheus: &manifest.PrometheusQuery{Query: "errors"}, SuccessCondition: "result < 1", Interval: "10s"}
			c := tc.carry
			c.Stable, c.ParentLease, c.ProgressAt = "db-postgres:16", "shop", time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
			in.Carry, _ = json.Marshal(c)
			f := newFakeStatefulSet("postgres:16")
			f.update, f.partition = "db-postgres:17", 1
			env := f.env()
			env.SetContinuedExecutionRunID("earlier-run")
			env.OnActivity((&activities.Activities{}).MeasurePrometheus, mock.Anything, mock.Anything).Return(
				&activities.Measurement{Phase: analysis.Successful, Message: "0 errors"}, nil)
			env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, time.Hour)
			env.ExecuteWorkflow(api.StatefulSetRolloutWorkflow, in)

			var cont *workflow.ContinueAsNewError
			require.ErrorAs(t, env.GetWorkflowError(), &cont)
			assert.Less(t, env.Now().Sub(c.ProgressAt), time.Hour+time.Minute, "continued as new at the next measurement, not at the end of the wait")
			var next carry
			var carried api.StatefulSetRolloutInput
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(cont.Input, &carried))
			require.NoError(t, json.Unmarshal(carried.Carry, &next))
			assert.Equal(t, c.StepIndex, next.StepIndex)
			assert.Equal(t, c.Paused, next.Paused)
		})
	}
}

// Guards the review's finding: a return's first read can be of the spec
// before the template was written back (the controller had not yet
// observed it): every pod of the failed revision then counted as
// "updated", the return's progress started at that high and no pod it
// brought back was progress, so a return of many pods met its deadline
// with pods left on the failed revision. A stale read is no progress now
// (and RevertStatefulSet waits for the controller to observe the write).
func TestAReturnsProgressIsNotTheFailedRevisionsPods(t *testing.T) {
	three, hundred := int32(3), int32(100)
	in := dbInput(t, "postgres:17")
	in.StatefulSet.Spec.Replicas = &three
	in.Steps = []manifest.CanaryStep{{SetWeight: &hundred}, {Pause: &manifest.Pause{}}}
	f := newFakeStatefulSet("postgres:16")
	f.replicas = 3
	f.reconcile()
	f.staleRevert = true
	err := rollOut(f, in, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			// Every ordinal on the new revision, held by the pause; the
			// pods the return brings back take 25s each (the deadline is
			// 60s: each pod back is progress, all three are not).
			f.mu.Lock()
			f.slow = 25
			f.mu.Unlock()
			require.NoError(t, env.UpdateWorkflowByID(api.RolloutWorkflowID(in.Namespace, "db"), api.UpdateAbort, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("abort refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {}}))
		}, time.Hour)
	})
	assert.Equal(t, api.ErrRolloutAborted, errorType(err), "%v", err)
	assert.Contains(t, err.Error(), "every ordinal runs revision db-postgres:16 again")
	assert.Equal(t, map[int32]string{0: "db-postgres:16 ready=true", 1: "db-postgres:16 ready=true", 2: "db-postgres:16 ready=true"}, f.podRevisions())
}

// Guards the review's finding: an abort accepted after a run decided to
// continue as new (in the task that settles its controls) was accepted
// and then forgotten: the continued run went on rolling out. It is carried
// now, and the continued run returns.
func TestAnAbortAcceptedAsTheRunContinuesAsNewIsCarried(t *testing.T) {
	fifty := int32(50)
	in := dbInput(t, "postgres:17")
	in.Steps = []manifest.CanaryStep{{SetWeight: &fifty}, {Pause: &manifest.Pause{}}}
	r := &run{in: in, Stable: "db-postgres:16", ParentLease: "shop", StepIndex: 1, abort: true}
	next := r.carryOver()
	c, err := decodeCarry(next)
	require.NoError(t, err)
	require.True(t, c.Abort, "the abort is in the carried state")

	f := newFakeStatefulSet("postgres:16")
	f.update, f.partition = "db-postgres:17", 1
	f.reconcile()
	env := f.env()
	env.SetContinuedExecutionRunID("earlier-run")
	env.ExecuteWorkflow(api.StatefulSetRolloutWorkflow, next)
	err = env.GetWorkflowError()
	assert.Equal(t, api.ErrRolloutAborted, errorType(err), "%v", err)
	assert.Equal(t, []string{"db-postgres:16"}, f.reverted, "the continued run returned")
	assert.Equal(t, map[int32]string{0: "db-postgres:16 ready=true", 1: "db-postgres:16 ready=true"}, f.podRevisions())
}

// Guards what make chaos found (the StatefulSet canary, the kube-apiserver
// or etcd stopped 30 s at the analysis step): the analysis Job's run was
// tried three times, at most 7 s apart, so the outage left it not
// measured, inconclusive, and the canary held for a human with the Job
// never run. Its run is now tried again through such an outage: the Job
// runs, fails, and the canary returns.
func TestAnAnalysisJobOutlastsAnAPIServerOutage(t *testing.T) {
	fifty := int32(50)
	in := dbInput(t, "postgres:17")
	in.Steps = []manifest.CanaryStep{{SetWeight: &fifty}, {Analysis: &manifest.Analysis{Job: &manifest.JobCheck{Image: "ghcr.io/acme/smoke:1"}}}}
	f := newFakeStatefulSet("postgres:16")
	attempts := 0
	err := rollOut(f, in, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity((&activities.Activities{}).RunJob, mock.Anything, mock.Anything).Return(
			func(context.Context, activities.JobCheckInput) (*activities.Measurement, error) {
				// Refused for the first five attempts: 1+2+4+8+15 s of
				// back-off, an outage of 30 s.
				if attempts++; attempts <= 5 {
					return nil, errors.New(`create job: dial tcp 127.0.0.1:16443: connect: connection refused`)
				}
				return &activities.Measurement{Phase: analysis.Failed, Message: "exit code 3"}, nil
			})
	})
	assert.Equal(t, api.ErrRolloutAborted, errorType(err), "%v", err)
	assert.Contains(t, err.Error(), "analysis failed")
	assert.Equal(t, 6, attempts)
	assert.Equal(t, map[int32]string{0: "db-postgres:16 ready=true", 1: "db-postgres:16 ready=true"}, f.podRevisions(), "db-1 back on the previous revision")
}
