package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/wftest"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// Issue 20.8 on the SDK's test environment, whose clock skips ahead to the
// next timer: a canary paused for a human for a day or a week, with a background
// analysis at the fastest interval an operator allows by default (1s, the
// floor of --min-analysis-interval), continues as new inside its pause
// again and again, each run's history well under Temporal's 51,200-event
// hard limit, the analysis's tally carried from run to run; promoted after
// the week, it completes. Before the gate continue-in-gates nothing left
// the pause: one run took every measurement of the week (about 3.6 million
// events by the model below) and the server would have terminated it at
// 51,200, in about two and a half hours.
//
// The test environment keeps no history, so historyModel counts the
// events Temporal writes for what the workflow does (the listeners see
// every timer, activity and local activity) and feeds the count back as
// GetInfo().GetCurrentHistoryLength(), as the server does. The live test
// TestAPausedCanaryWithABackgroundAnalysisContinuesAsNewInsideItsPause
// checks the same hand-over against real histories, with a small budget.
//
// make test pauses it for a day (86,400 measurements, far past the limit
// the run would have reached in two and a half hours); make chaos, for a
// week (DEPLOYFLOW_LONG_SWEEPS=1): 2 to 3 minutes of a CPU for 604,800
// measurements, the largest single cost of make test's live phase, which
// the day already shows.
func TestALongPauseWithTheFastestAnalysisKeepsEveryRunUnderTheHistoryLimit(t *testing.T) {
	// The SDK's test environment only, no server: it runs beside the
	// package's other tests (CI time).
	t.Parallel()
	week := 24 * time.Hour
	if os.Getenv("DEPLOYFLOW_LONG_SWEEPS") == "1" {
		week = 7 * 24 * time.Hour
	}
	t.Logf("paused for %s", week)
	const (
		hardLimit  = 51200 // Temporal's default history count limit: the server terminates the run
		oneMeasure = 6     // events of one background measurement: timer started, fired, a workflow task (3), marker
	)
	interval := manifest.DefaultLimits().MinInterval
	require.Equal(t, time.Second, interval, "the fastest analysis the default limits allow")

	cluster := newFakeReplicaSets()
	start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

	// The stable version, rolled out from nothing.
	stable := api.RolloutInput{Namespace: "lease-week", Service: "web", Deployment: weekDeployment("nginx:1.26")}
	env, _ := cluster.env(t, start, "")
	env.ExecuteWorkflow(RolloutWorkflow, stable)
	require.NoError(t, env.GetWorkflowError())
	var res api.RolloutResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, api.OutcomeComplete, res.Outcome)

	// The canary: 50%, then a pause for a human, a background analysis
	// every second throughout.
	half := int32(50)
	in := api.RolloutInput{Namespace: "lease-week", Service: "web", Deployment: weekDeployment("nginx:1.27"),
		Steps:      []manifest.CanaryStep{{SetWeight: &half}, {Pause: &manifest.Pause{}}},
		Background: &manifest.Analysis{Prometheus: &manifest.PrometheusQuery{Query: "vector(1)"}, SuccessCondition: "result == 1", Interval: interval.String()}}
	now, runs, longest, measured := start, 0, 0, 0
	promoteAt := start.Add(week)
	for {
		runs++
		require.Less(t, runs, 5000, "the rollout never ended")
		env, model := cluster.env(t, now, fmt.Sprintf("run-%d", runs-1))
		if left := promoteAt.Sub(now); left > 0 {
			env.RegisterDelayedCallback(func() {
				env.UpdateWorkflow(api.UpdatePromote, "", &testsuite.TestUpdateCallback{
					OnReject: func(err error) { t.Errorf("promote refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
				}, api.PromoteRequest{})
				model.add(5) // update accepted, completed, and its workflow task
			}, left)
		}
		env.ExecuteWorkflow(RolloutWorkflow, in)
		require.True(t, env.IsWorkflowCompleted())
		measured += int(model.measured.Load())
		longest = max(longest, model.events)
		assert.Less(t, model.events, flow.ContinueAsNewAfter+3*oneMeasure,
			"run %d outgrew its budget: %d events (%d measurements)", runs, model.events, model.measured.Load())
		now = env.Now()

		var can *workflow.ContinueAsNewError
		if err := env.GetWorkflowError(); errors.As(err, &can) {
			var next api.RolloutInput
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
			require.NotNil(t, next.Carry, "run %d continued without its state", runs)
			require.NotNil(t, rolledOut(next).Carry.Canary)
			c := rolledOut(next).Carry.Canary
			if now.Before(promoteAt) {
				assert.Equal(t, 1, c.Step, "run %d left the pause", runs)
			}
			// The tally goes on: every measurement of every run so far
			// but the one in flight at each hand-over, if any (its
			// result is dropped; the next run measures again).
			require.NotNil(t, c.Background)
			require.LessOrEqual(t, int(c.Background.Measured), measured, "run %d's tally counts more than was measured", runs)
			require.GreaterOrEqual(t, int(c.Background.Measured), measured-runs, "run %d's tally was not carried", runs)
			in = next
			continue
		}
		require.NoError(t, env.GetWorkflowError())
		require.NoError(t, env.GetWorkflowResult(&res))
		break
	}
	assert.Equal(t, api.OutcomeComplete, res.Outcome)
	assert.Equal(t, int32(4), res.AvailableReplicas)
	assert.False(t, now.Before(promoteAt), "promoted before the week was over")
	weekOfMeasurements := int(week / interval)
	assert.InDelta(t, weekOfMeasurements, measured, float64(runs)*2, "a measurement every second, all week")
	t.Logf("%s paused: %d runs, the longest %d events (hard limit %d); %d measurements", week, runs, longest, hardLimit, measured)
	assert.Less(t, longest, hardLimit/10)
	assert.Greater(t, runs, weekOfMeasurements*oneMeasure/hardLimit, "fewer runs than the week's events need")
}

// historyModel counts the events Temporal would write for one run, from
// the test environment's listeners, and sets them as the run's current
// history length: the workflow's own checks then see what the server would
// tell them.
type historyModel struct {
	env      *testsuite.TestWorkflowEnvironment
	events   int
	measured atomic.Int64 // counted by the activity's goroutine
}

func (h *historyModel) add(n int) {
	h.events += n
	h.env.SetCurrentHistoryLength(h.events)
}

func (h *historyModel) listen() {
	// Started, its first workflow task (scheduled, started, completed),
	// and a marker per version gate asked (at most one per change ID).
	h.add(4 + gateMarkers)
	h.env.SetOnTimerScheduledListener(func(string, time.Duration) { h.add(1) })
	h.env.SetOnTimerFiredListener(func(string) { h.add(1 + 3) })
	h.env.SetOnTimerCanceledListener(func(string) { h.add(1) })
	h.env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { h.add(2) })
	h.env.SetOnActivityCompletedListener(func(*activity.Info, converter.EncodedValue, error) { h.add(1 + 3) })
	h.env.SetOnLocalActivityCompletedListener(func(*activity.Info, converter.EncodedValue, error) { h.add(1) })
}

// gateMarkers bounds the version markers of one run: one per change ID
// asked (internal/flow/gates.go has 16), counted up front.
const gateMarkers = 20

// fakeReplicaSets is a cluster for the SDK's test environment: the
// ReplicaSets a rollout writes, each scaled one available at once.
type fakeReplicaSets struct {
	mu     sync.Mutex // the activities' goroutines and the test's
	rs     map[string]*appsv1.ReplicaSet
	writes int
	// staleOnce: ReplicaSets the next read returns with this many
	// available (a ReplicaSet controller behind its pods), once.
	staleOnce map[string]int32
	// neverAvailable: images whose pods never become available.
	neverAvailable []string
}

func newFakeReplicaSets() *fakeReplicaSets {
	return &fakeReplicaSets{rs: map[string]*appsv1.ReplicaSet{}}
}

func (f *fakeReplicaSets) state() activities.RolloutState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snapshot()
}

// snapshot is state, f.mu held.
func (f *fakeReplicaSets) snapshot() activities.RolloutState {
	names := make([]string, 0, len(f.rs))
	for name := range f.rs {
		names = append(names, name)
	}
	sort.Strings(names)
	st := activities.RolloutState{Digest: strconv.Itoa(f.writes)}
	for _, name := range names {
		rs := f.rs[name].DeepCopy()
		if n, ok := f.staleOnce[name]; ok {
			rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = n, n
			delete(f.staleOnce, name)
		}
		st.ReplicaSets = append(st.ReplicaSets, rs)
	}
	return st
}

func (f *fakeReplicaSets) available(rs *appsv1.ReplicaSet) {
	if slices.Contains(f.neverAvailable, rs.Spec.Template.Spec.Containers[0].Image) {
		rs.Status = appsv1.ReplicaSetStatus{Replicas: *rs.Spec.Replicas, ObservedGeneration: rs.Generation}
		return
	}
	n := *rs.Spec.Replicas
	rs.Status = appsv1.ReplicaSetStatus{Replicas: n, FullyLabeledReplicas: n, ReadyReplicas: n, AvailableReplicas: n, ObservedGeneration: rs.Generation}
}

func (f *fakeReplicaSets) apply(in activities.ApplyPlanInput) *activities.ApplyPlanResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if u := in.Update; u != nil {
		rs := u.DeepCopy()
		rs.Status = f.rs[rs.Name].Status
		f.rs[rs.Name] = rs
	}
	if c := in.Create; c != nil {
		rs := c.DeepCopy()
		rs.UID = types.UID(rs.Name)
		f.available(rs)
		f.rs[rs.Name] = rs
	}
	var scales []activities.ScaleResult
	for _, op := range in.Scales {
		rs := f.rs[op.ReplicaSet]
		rs.Spec.Replicas = &op.To
		f.available(rs)
		scales = append(scales, activities.ScaleResult{ReplicaSet: op.ReplicaSet, From: op.From, To: op.To, Wrote: true})
	}
	for _, name := range in.Deletes {
		delete(f.rs, name)
	}
	return &activities.ApplyPlanResult{State: f.snapshot(), Scales: scales}
}

// env is one run's test environment on the fake cluster, its clock at now;
// continued is the run it continues ("" for a first run).
func (f *fakeReplicaSets) env(t *testing.T, now time.Time, continued string) (*testsuite.TestWorkflowEnvironment, *historyModel) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler))) // a week of measurements
	env := wftest.NewEnv(&s)
	model := &historyModel{env: env}
	env.SetStartTime(now)
	if continued != "" {
		env.SetContinuedExecutionRunID(continued)
	}
	a := &activities.Activities{}
	env.RegisterActivity(a)
	env.OnActivity(a.PrepareRollout, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PrepareRolloutInput) (*activities.PrepareRolloutResult, error) {
			return &activities.PrepareRolloutResult{Deployment: in.Deployment, State: f.state()}, nil
		}).Maybe()
	env.OnActivity(a.ReadRolloutState, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.ServiceRef) (*activities.RolloutState, error) {
			st := f.state()
			return &st, nil
		}).Maybe()
	env.OnActivity(a.ApplyPlan, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ApplyPlanInput) (*activities.ApplyPlanResult, error) {
			return f.apply(in), nil
		}).Maybe()
	// Nothing changes by itself here: a wait ends at its timeout.
	env.OnActivity(a.WaitForChange, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.WaitForChangeInput) (*activities.RolloutState, error) {
			st := f.state()
			return &st, nil
		}).After(time.Minute).Maybe()
	env.OnActivity(a.MeasurePrometheus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MeasureInput) (*activities.Measurement, error) {
			model.measured.Add(1)
			one := 1.0
			return &activities.Measurement{Value: &one, Phase: analysis.Successful, Message: "1"}, nil
		}).Maybe()
	env.OnActivity(a.Notify, mock.Anything, mock.Anything).Return(nil).Maybe()
	model.listen()
	return env, model
}

// weekDeployment is web at image, four replicas, defaulted as the API
// server would.
func weekDeployment(image string) appsv1.Deployment {
	four := int32(4)
	return appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &four, Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
	}}}
}
