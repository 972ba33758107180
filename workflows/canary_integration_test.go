package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/worker/app"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Canary rollouts (issue 12.2, 12.3) on the local stack, with the stack's
// real Prometheus scraping a target whose error rate each test sets.

// errorRateTarget serves a request counter by status code, counting 100
// requests a second of which the given share (in whole percent) fail, and is scraped by the
// stack's Prometheus (a file in its targets directory) under the label
// test=<name>.
type errorRateTarget struct {
	name     string
	permille atomic.Int64
}

// Its series carry the lease's namespace (as Kubernetes service discovery
// labels a pod's): an analysis reads only its own lease's series.
func newErrorRateTarget(t *testing.T, env *testenv.Env, namespace string, errorRate float64) *errorRateTarget {
	t.Helper()
	target := &errorRateTarget{name: testenv.ShortName("target")}
	target.set(errorRate)
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "canary_test_requests_total", Help: "requests by code"}, []string{"code"})
	reg.MustRegister(requests)
	ok, failed := requests.WithLabelValues("200"), requests.WithLabelValues("500")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			// The failures spread over every second (40% is 40 of each
			// second's 100 requests): a 5s window sees the set rate. (Spread
			// over 10s, as before, a window could fall in the 6s without
			// failures, and a 40% canary passed its analysis: 1 CI run in 2.)
			if i%100 < target.permille.Load()/10 {
				failed.Inc()
			} else {
				ok.Inc()
			}
		}
	}()
	file := filepath.Join(env.Stack.PrometheusTargets(), target.name+".json")
	b, _ := json.Marshal([]map[string]any{{"targets": []string{ln.Addr().String()}, "labels": map[string]string{"test": target.name, "namespace": namespace}}})
	require.NoError(t, os.WriteFile(file, b, 0o644))
	t.Cleanup(func() {
		_ = os.Remove(file)
		close(stop)
		wg.Wait()
		_ = srv.Close()
	})
	// Prometheus finds the file, scrapes, and has a rate to give.
	prom, err := app.PrometheusAPI(devstack.PrometheusURL)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		v, _, _, err := prom.Query(context.Background(), target.query(), time.Now())
		vec, ok := v.(model.Vector)
		return err == nil && ok && len(vec) == 1
	}, 3*time.Minute, 500*time.Millisecond, "Prometheus never had the target's error rate")
	return target
}

// set changes the share of failing requests from now on.
func (e *errorRateTarget) set(rate float64) { e.permille.Store(int64(rate * 1000)) }

// query is the error rate over the last 5s.
func (e *errorRateTarget) query() string {
	return fmt.Sprintf(`sum(rate(canary_test_requests_total{test=%q,code="500"}[5s])) / sum(rate(canary_test_requests_total{test=%q}[5s]))`, e.name, e.name)
}

// canaryManifest is web, 10 replicas, its RollingUpdate limits and steps.
func canaryManifest(lease, image string, maxSurge, maxUnavailable int, steps ...manifest.CanaryStep) manifest.Manifest {
	replicas := int32(10)
	surge, unavail := intstr.FromInt32(int32(maxSurge)), intstr.FromInt32(int32(maxUnavailable))
	r := &manifest.Rollout{Strategy: manifest.StrategyCanary, MaxSurge: &surge, MaxUnavailable: &unavail, Steps: steps}
	return manifest.Manifest{Lease: lease, Services: []manifest.Service{{Name: "web", Image: image, Replicas: &replicas, Rollout: r}}}
}

func weight(w int32) manifest.CanaryStep { return manifest.CanaryStep{SetWeight: &w} }

func pause(d string) manifest.CanaryStep {
	return manifest.CanaryStep{Pause: &manifest.Pause{Duration: d}}
}

func errorRateBelow(target *errorRateTarget, threshold string) manifest.CanaryStep {
	return manifest.CanaryStep{Analysis: &manifest.Analysis{
		Prometheus:       &manifest.PrometheusQuery{Query: target.query()},
		SuccessCondition: "result < " + threshold, Interval: "2s", Count: 3,
	}}
}

// rolloutStatus is the web rollout's status query.
func (dt *deployTest) rolloutStatus() (api.RolloutStatus, error) {
	var st api.RolloutStatus
	v, err := dt.env.Patient().QueryWorkflow(context.Background(), api.RolloutWorkflowID(manifest.Namespace(dt.lease), "web"), "", api.QueryStatus)
	if err == nil {
		err = v.Get(&st)
	}
	return st, err
}

// waitCanary waits until the web rollout's canary summary starts with want.
func (dt *deployTest) waitCanary(want string, within time.Duration) api.RolloutStatus {
	dt.t.Helper()
	var st api.RolloutStatus
	testenv.Eventually(dt.t, within, 200*time.Millisecond, fmt.Sprintf("the canary never reached %q", want), func() (bool, string) {
		s, err := dt.rolloutStatus()
		if err != nil {
			return false, err.Error()
		}
		st = s
		return s.Canary != nil && strings.HasPrefix(s.Canary.Summary, want), fmt.Sprintf("%s %+v", s.Step, s.Canary)
	})
	return st
}

// byImage is the web ReplicaSets' spec and available replicas by image.
func (dt *deployTest) byImage() (spec, available map[string]int32) {
	dt.t.Helper()
	list, err := dt.env.Kube.AppsV1().ReplicaSets(manifest.Namespace(dt.lease)).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	require.NoError(dt.t, err)
	spec, available = map[string]int32{}, map[string]int32{}
	for _, rs := range list.Items {
		img := rs.Spec.Template.Spec.Containers[0].Image
		spec[img] += *rs.Spec.Replicas
		available[img] += rs.Status.AvailableReplicas
	}
	return spec, available
}

func (dt *deployTest) promote(full bool) error {
	return dt.rolloutUpdate(api.UpdatePromote, api.PromoteRequest{Full: full})
}

// rolloutUpdate sends the web rollout an operator's update.
func (dt *deployTest) rolloutUpdate(name string, args ...any) error {
	h, err := dt.env.Temporal.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{
		WorkflowID: api.RolloutWorkflowID(manifest.Namespace(dt.lease), "web"), UpdateName: name,
		Args: args, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(context.Background(), nil)
	}
	return err
}

// rolloutActivities counts the local activities of the web rollout's
// history by type.
func (dt *deployTest) rolloutActivities() map[string]int {
	dt.t.Helper()
	it := dt.env.Temporal.GetWorkflowHistory(context.Background(), api.RolloutWorkflowID(manifest.Namespace(dt.lease), "web"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	out := map[string]int{}
	dc := converter.GetDefaultDataConverter()
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(dt.t, err)
		if ev.GetTimerStartedEventAttributes() != nil {
			out["timer"]++
		}
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "LocalActivity" {
			continue
		}
		var data struct{ ActivityType string }
		require.NoError(dt.t, dc.FromPayloads(m.GetDetails()["data"], &data))
		out[data.ActivityType]++
	}
	return out
}

// A canary 10% → pause 30s → analysis (error rate below 5%) → 50% → pause
// until promoted: the replicas on each version at each step are the
// weight's share, the status says which step it is on, the history holds
// the pause's timer and the analysis's measurements, and promote finishes
// the rollout.
func TestCanaryWithAnAnalysisGateIsPromoted(t *testing.T) {
	hook := newWebhook(t, 0)
	dt := newDeployTestWith(t, func(a *activities.Activities) { a.Notifier = &activities.Notifier{URL: hook.url} })
	target := newErrorRateTarget(t, dt.env, manifest.Namespace(dt.lease), 0.01)
	steps := []manifest.CanaryStep{weight(10), pause("30s"), errorRateBelow(target, "0.05"), weight(50), pause("")}
	dt.deploy(canaryManifest(dt.lease, "nginx:1.26", 3, 0, steps...))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase, "the first deploy has nothing to compare with: no canary")

	dt.deploy(canaryManifest(dt.lease, "nginx:1.27", 3, 0, steps...))
	st := dt.waitCanary("step 2/5: pause", 60*time.Second)
	assert.Regexp(t, `^step 2/5: pause \d+s left$`, st.Canary.Summary)
	assert.Equal(t, []string{"setWeight 10%", "pause 30s", "analysis (3× every 2s)", "setWeight 50%", "pause until promoted"}, st.Canary.List)
	spec, available := dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.27": 1, "nginx:1.26": 9}, spec, "10%% of 10 replicas on the canary")
	assert.Equal(t, map[string]int32{"nginx:1.27": 1, "nginx:1.26": 9}, available)

	st = dt.waitCanary("step 5/5: pause until promoted", 90*time.Second)
	spec, available = dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.27": 5, "nginx:1.26": 5}, spec, "50%%")
	assert.Equal(t, map[string]int32{"nginx:1.27": 5, "nginx:1.26": 5}, available)
	time.Sleep(3 * time.Second)
	st = dt.waitCanary("step 5/5: pause until promoted", time.Second)
	require.NoError(t, dt.promote(false))

	lease := dt.waitRevision(dt.lease, 2)
	require.Equal(t, api.PhaseActive, lease.Phase, lease.LastError)
	_, available = dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.27": 10, "nginx:1.26": 0}, available)
	acts := dt.rolloutActivities()
	assert.Equal(t, 3, acts["MeasurePrometheus"], "the analysis's three measurements are in the rollout's history")
	// Issue 20.1: each was judged by the activity that took it (its
	// recorded result carries the verdict), not by workflow code.
	for _, m := range dt.measurements(api.RolloutWorkflowID(manifest.Namespace(dt.lease), "web"), "MeasurePrometheus") {
		assert.Equal(t, "Successful", string(m.Phase), m.Message)
	}
	assert.Positive(t, acts["timer"], "the pause's timer is in the rollout's history")
	assert.Equal(t, []string{
		"StepCompleted: step 1/5 (setWeight 10%) completed",
		"StepCompleted: step 2/5 (pause 30s) completed",
		"StepCompleted: step 3/5 (analysis (3× every 2s)) completed",
		"StepCompleted: step 4/5 (setWeight 50%) completed",
		"Paused: step 5/5: paused until promoted (deployflow promote)",
		"Promoted: step 5/5 (pause until promoted) promoted",
	}, hook.received())
}

// The same canary with a rising error rate aborts at the analysis: the
// stable version is back at full strength, never with fewer available
// replicas than maxUnavailable allows (0 here), and the lease's history
// says why.
func TestCanaryAbortsAtAFailedAnalysis(t *testing.T) {
	dt := newDeployTest(t)
	target := newErrorRateTarget(t, dt.env, manifest.Namespace(dt.lease), 0.01)
	steps := []manifest.CanaryStep{weight(10), pause("2s"), errorRateBelow(target, "0.05"), weight(50), pause("")}
	dt.deploy(canaryManifest(dt.lease, "nginx:1.26", 2, 0, steps...))
	dt.waitRevision(dt.lease, 1)

	// The canary's errors rise as it starts. (Set once the canary was seen
	// at its 2s pause, a loaded machine could see the pause only as the
	// analysis was passing on the rate before the rise: 1 run in 3 with
	// the CPU busy.)
	target.set(0.4)
	dt.deploy(canaryManifest(dt.lease, "nginx:1.27", 2, 0, steps...))
	var minAvailable atomic.Int32
	minAvailable.Store(10)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			list, err := dt.env.Kube.AppsV1().ReplicaSets(manifest.Namespace(dt.lease)).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
			if err != nil {
				continue
			}
			var n int32
			for _, rs := range list.Items {
				n += rs.Status.AvailableReplicas
			}
			if n < minAvailable.Load() {
				minAvailable.Store(n)
			}
		}
	}()
	lease := dt.waitRevision(dt.lease, 2)
	close(done)
	assert.Equal(t, api.PhaseFailed, lease.Phase)
	last := lease.History[len(lease.History)-1]
	assert.Contains(t, last.Outcome, "canary aborted: analysis failed")
	assert.Contains(t, last.Outcome, "rolled back to the last-known-good manifest")
	// The executed tree says where it stopped: the analysis step failed,
	// the steps after it and the release never ran.
	require.NotNil(t, last.Tree)
	roll := last.Tree.Find(plan.OpRollOut, "web")
	require.NotNil(t, roll, last.Tree.String())
	assert.Equal(t, plan.Failed, roll.State)
	var states []plan.State
	for _, s := range roll.Children {
		states = append(states, s.State)
	}
	assert.Equal(t, []plan.State{plan.Done, plan.Done, plan.Failed, plan.Skipped, plan.Skipped}, states, last.Tree.String())
	assert.Contains(t, roll.Children[2].Error, "analysis failed")
	assert.Equal(t, plan.Skipped, last.Tree.ByOp(plan.OpRelease)[0].State)
	assert.NotNil(t, last.Rollback, "the return to the last-known-good manifest is recorded too")
	_, available := dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.26": 10, "nginx:1.27": 0}, available, "the stable version is back")
	assert.GreaterOrEqual(t, minAvailable.Load(), int32(10), "never fewer available than replicas - maxUnavailable")
}

// webhook records the notifications it receives; it answers 503 to the
// first fail of them (the worker retries).
type webhook struct {
	mu     sync.Mutex
	fail   int
	events []activities.Notification
	url    string
}

func newWebhook(t *testing.T, fail int) *webhook {
	h := &webhook{fail: fail}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.fail > 0 {
			h.fail--
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		var n activities.Notification
		if err := json.NewDecoder(req.Body).Decode(&n); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.events = append(h.events, n)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// received is "Event: message" of each notification, in order.
func (h *webhook) received() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, n := range h.events {
		out = append(out, n.Event+": "+n.Message)
	}
	return out
}

// pause: {} waits until promoted; abort during the pause returns to the
// stable version at once. The worker's webhook hears of each step, the
// pause and the abort, in order, although it refuses the first two posts.
func TestCanaryPauseWaitsUntilAbortReturnsToStable(t *testing.T) {
	hook := newWebhook(t, 2)
	dt := newDeployTestWith(t, func(a *activities.Activities) { a.Notifier = &activities.Notifier{URL: hook.url} })
	steps := []manifest.CanaryStep{weight(20), pause("")}
	dt.deploy(canaryManifest(dt.lease, "nginx:1.26", 3, 0, steps...))
	dt.waitRevision(dt.lease, 1)

	dt.deploy(canaryManifest(dt.lease, "nginx:1.27", 3, 0, steps...))
	dt.waitCanary("step 2/2: pause until promoted", 60*time.Second)
	time.Sleep(5 * time.Second)
	dt.waitCanary("step 2/2: pause until promoted", time.Second) // still waiting
	spec, _ := dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.27": 2, "nginx:1.26": 8}, spec)

	require.NoError(t, dt.rolloutUpdate(api.UpdateAbort))
	lease := dt.waitRevision(dt.lease, 2)
	assert.Equal(t, api.PhaseFailed, lease.Phase)
	assert.Contains(t, lease.History[len(lease.History)-1].Outcome, "canary aborted: by an operator")
	_, available := dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.26": 10, "nginx:1.27": 0}, available)
	assert.Equal(t, []string{
		"StepCompleted: step 1/2 (setWeight 20%) completed",
		"Paused: step 2/2: paused until promoted (deployflow promote)",
		"Aborted: aborted by an operator; returning to the stable revision",
	}, hook.received())
}

// A background analysis runs beside the steps: when the canary's error
// rate rises during its pause, the canary aborts without waiting for the
// pause to end, and the executed tree says the background analysis failed.
func TestCanaryBackgroundAnalysisAbortsDuringAPause(t *testing.T) {
	var rate atomic.Value
	rate.Store("0.0")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"errorRate": ` + rate.Load().(string) + `}`))
	}))
	t.Cleanup(srv.Close)
	dt := newDeployTestWith(t, func(a *activities.Activities) { a.HTTPCheckAllow = []string{"127.0.0.1/32"} }) // the test's own check endpoint
	m := func(image string) manifest.Manifest {
		m := canaryManifest(dt.lease, image, 2, 0, weight(50), pause(""))
		m.Services[0].Rollout.Analysis = &manifest.Analysis{HTTP: &manifest.HTTPCheck{URL: srv.URL, JSONField: "errorRate"}, SuccessCondition: "result < 0.05", Interval: "1s"}
		return m
	}
	dt.deploy(m("nginx:1.26"))
	dt.waitRevision(dt.lease, 1)
	dt.deploy(m("nginx:1.27"))
	dt.waitCanary("step 2/2: pause until promoted", 60*time.Second)
	time.Sleep(2 * time.Second)
	st, err := dt.rolloutStatus()
	require.NoError(t, err)
	require.NotNil(t, st.Canary)
	assert.Equal(t, "step 2/2: pause until promoted", st.Canary.Summary, "the background analysis passes while the rate is low")
	rate.Store("0.5")

	lease := dt.waitRevision(dt.lease, 2)
	assert.Equal(t, api.PhaseFailed, lease.Phase)
	last := lease.History[len(lease.History)-1]
	assert.Contains(t, last.Outcome, "canary aborted: background analysis failed")
	_, available := dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.26": 10, "nginx:1.27": 0}, available, "the stable version is back")
	roll := last.Tree.Find(plan.OpRollOut, "web")
	require.NotNil(t, roll)
	bg := roll.ByOp(plan.OpBackground)
	require.Len(t, bg, 1, roll.Children)
	assert.Equal(t, plan.Failed, bg[0].State)
	assert.Contains(t, bg[0].Error, "errorRate = 0.5 Failed")
	steps := roll.ByOp(plan.OpCanaryStep)
	assert.Equal(t, plan.Done, steps[0].State)
	assert.Equal(t, plan.Failed, steps[1].State, "it stopped in the pause")
}

// setCanaryScale runs the canary by count: 3 pods of the new version and 7
// of the stable one, whatever the weight; matchTrafficWeight returns to
// the last setWeight's split.
func TestSetCanaryScaleSplitsByCount(t *testing.T) {
	dt := newDeployTest(t)
	three := int32(3)
	steps := []manifest.CanaryStep{weight(20), {SetCanaryScale: &manifest.CanaryScale{Replicas: &three}}, pause(""),
		{SetCanaryScale: &manifest.CanaryScale{MatchTrafficWeight: true}}, pause("")}
	dt.deploy(canaryManifest(dt.lease, "nginx:1.26", 2, 0, steps...))
	dt.waitRevision(dt.lease, 1)
	dt.deploy(canaryManifest(dt.lease, "nginx:1.27", 2, 0, steps...))
	dt.waitCanary("step 3/5: pause until promoted", 60*time.Second)
	spec, available := dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.27": 3, "nginx:1.26": 7}, spec)
	assert.Equal(t, map[string]int32{"nginx:1.27": 3, "nginx:1.26": 7}, available)
	require.NoError(t, dt.promote(false))
	dt.waitCanary("step 5/5: pause until promoted", 60*time.Second)
	spec, _ = dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.27": 2, "nginx:1.26": 8}, spec, "back to setWeight 20%")
	require.NoError(t, dt.promote(false))
	assert.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 2).Phase)
}

// A Job check: the first smoke test exits 0 and the canary goes on; the
// second exits 3 and the canary aborts. Each ran as a Job in the lease's
// namespace.
func TestCanaryJobChecksGateTheSteps(t *testing.T) {
	dt := newDeployTest(t)
	job := func(code string) manifest.CanaryStep {
		return manifest.CanaryStep{Analysis: &manifest.Analysis{Job: &manifest.JobCheck{
			Image: "ghcr.io/acme/smoke:1", Command: []string{"/smoke", "--target", "web"},
			PodAnnotations: map[string]string{"deployflow.dev/exit-code": code}, // the local stack's pods exit with it
		}}}
	}
	steps := []manifest.CanaryStep{weight(20), job("0"), weight(50), job("3"), pause("")}
	dt.deploy(canaryManifest(dt.lease, "nginx:1.26", 2, 0, steps...))
	dt.waitRevision(dt.lease, 1)
	dt.deploy(canaryManifest(dt.lease, "nginx:1.27", 2, 0, steps...))
	lease := dt.waitRevision(dt.lease, 2)
	assert.Equal(t, api.PhaseFailed, lease.Phase)
	last := lease.History[len(lease.History)-1]
	assert.Contains(t, last.Outcome, "canary aborted: analysis failed: 1 measured: 0 successful, 1 failed")
	assert.Contains(t, last.Outcome, "failed: BackoffLimitExceeded")
	jobs, err := dt.env.Kube.BatchV1().Jobs(manifest.Namespace(dt.lease)).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var ends []string
	for _, j := range jobs.Items {
		assert.Equal(t, []string{"/smoke", "--target", "web"}, j.Spec.Template.Spec.Containers[0].Command)
		for _, c := range j.Status.Conditions {
			if c.Status == "True" && (c.Type == "Complete" || c.Type == "Failed") {
				ends = append(ends, string(c.Type))
			}
		}
	}
	sort.Strings(ends)
	assert.Equal(t, []string{"Complete", "Failed"}, ends, "two smoke-test Jobs ran: one passed, one failed")
	states := []plan.State{}
	for _, s := range last.Tree.Find(plan.OpRollOut, "web").ByOp(plan.OpCanaryStep) {
		states = append(states, s.State)
	}
	assert.Equal(t, []plan.State{plan.Done, plan.Done, plan.Done, plan.Failed, plan.Skipped}, states)
}
