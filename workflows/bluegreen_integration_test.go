package workflows_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Blue-green rollouts (issue 12.4) on the local stack.

// blueGreenManifest is web, 4 replicas on port 80, blue-green with bg.
func blueGreenManifest(lease, image string, bg *manifest.BlueGreen) manifest.Manifest {
	replicas := int32(4)
	return manifest.Manifest{Lease: lease, Services: []manifest.Service{{
		Name: "web", Image: image, Replicas: &replicas, Ports: []manifest.Port{{Port: 80}},
		Rollout: &manifest.Rollout{Strategy: manifest.StrategyBlueGreen, BlueGreen: bg},
	}}}
}

// selects is the pod-template-hash each of the web's Services selects.
func (dt *deployTest) selects() map[string]string {
	dt.t.Helper()
	list, err := dt.env.Kube.CoreV1().Services(manifest.Namespace(dt.lease)).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	require.NoError(dt.t, err)
	out := map[string]string{}
	for _, s := range list.Items {
		out[s.Name] = s.Spec.Selector[manifest.PodTemplateHashLabel]
	}
	return out
}

// hashOf is the pod-template-hash of the web ReplicaSet running image.
func (dt *deployTest) hashOf(image string) string {
	dt.t.Helper()
	list, err := dt.env.Kube.AppsV1().ReplicaSets(manifest.Namespace(dt.lease)).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	require.NoError(dt.t, err)
	for _, rs := range list.Items {
		if rs.Spec.Template.Spec.Containers[0].Image == image {
			return rs.Labels[manifest.PodTemplateHashLabel]
		}
	}
	dt.t.Fatalf("no ReplicaSet of web runs %s", image)
	return ""
}

// pods are the names of the web's pods (all versions), sorted.
func (dt *deployTest) pods() []string {
	dt.t.Helper()
	list, err := dt.env.Kube.CoreV1().Pods(manifest.Namespace(dt.lease)).List(context.Background(), metav1.ListOptions{LabelSelector: manifest.AppLabel + "=web"})
	require.NoError(dt.t, err)
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// waitBlueGreen waits until the web rollout's blue-green summary starts
// with want.
func (dt *deployTest) waitBlueGreen(want string, within time.Duration) api.RolloutStatus {
	dt.t.Helper()
	var st api.RolloutStatus
	testenv.Eventually(dt.t, within, 200*time.Millisecond, fmt.Sprintf("the blue-green never reached %q", want), func() (bool, string) {
		s, err := dt.rolloutStatus()
		if err != nil {
			return false, err.Error()
		}
		st = s
		return s.BlueGreen != nil && strings.HasPrefix(s.BlueGreen.Summary, want), fmt.Sprintf("%s %s %+v", s.Step, s.Message, s.BlueGreen)
	})
	return st
}

// The preview gets the new version while the active Service keeps
// selecting the old one; promote switches the active Service; undo within
// the scale-down delay switches it back at once, without creating a pod.
func TestBlueGreenPreviewPromoteAndUndoWithinTheDelay(t *testing.T) {
	dt := newDeployTest(t)
	delay, preview := int32(600), int32(2)
	bg := &manifest.BlueGreen{ScaleDownDelaySeconds: &delay, PreviewReplicaCount: &preview}
	dt.deploy(blueGreenManifest(dt.lease, "nginx:1.26", bg))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase, "the first deploy has nothing to switch from")
	blue := dt.hashOf("nginx:1.26")
	assert.Equal(t, map[string]string{"web": blue, "web-preview": blue}, dt.selects(), "a first deploy's rolling update ends with both Services pinned to it")

	dt.deploy(blueGreenManifest(dt.lease, "nginx:1.27", bg))
	st := dt.waitBlueGreen("step 2/5: await promotion", 60*time.Second)
	green := dt.hashOf("nginx:1.27")
	assert.Equal(t, map[string]string{"web": blue, "web-preview": green}, dt.selects(), "the preview selects the new version, the active Service still the old")
	spec, available := dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.26": 4, "nginx:1.27": 2}, spec, "previewReplicaCount of the new version beside all of the old")
	assert.Equal(t, map[string]int32{"nginx:1.26": 4, "nginx:1.27": 2}, available)
	assert.Equal(t, blue, st.BlueGreen.Active)
	time.Sleep(2 * time.Second)
	assert.Equal(t, blue, dt.selects()["web"], "no promotion, no switch")

	require.NoError(t, dt.promote(false))
	dt.waitBlueGreen("step 5/5: keep the old version 600s for undo", 60*time.Second)
	assert.Equal(t, map[string]string{"web": green, "web-preview": green}, dt.selects(), "promoted: the active Service selects the new version")
	spec, _ = dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.26": 4, "nginx:1.27": 4}, spec, "the old version stays up through the delay")

	before := dt.pods()
	require.NoError(t, dt.rolloutUpdate(api.UpdateUndo, api.UndoRequest{}))
	testenv.Eventually(t, 2*time.Minute, pollQuery, "the active Service never switched back", func() (bool, string) {
		s := dt.selects()
		return s["web"] == blue, fmt.Sprintf("%v", s)
	})
	lease := dt.waitRevision(dt.lease, 2)
	assert.Equal(t, api.PhaseFailed, lease.Phase, "an undone deploy fails, and the lease returns to its last-known-good manifest")
	after := dt.pods()
	assert.Subset(t, before, after, "undo created no pod")
	_, available = dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.26": 4, "nginx:1.27": 0}, available, "the old version, as it was; the new one scaled down")
	assert.Equal(t, blue, dt.selects()["web"])

	last := lease.History[len(lease.History)-1]
	require.NotNil(t, last.Tree)
	roll := last.Tree.Find(plan.OpRollOut, "web")
	require.NotNil(t, roll, last.Tree.String())
	var states []plan.State
	for _, s := range roll.Children {
		states = append(states, s.State)
	}
	assert.Equal(t, []plan.State{plan.Done, plan.Done, plan.Done, plan.Done, plan.Failed}, states, last.Tree.String())
}

// With autoPromotionSeconds the switch needs no one; with no scale-down
// delay the old version then goes at once, and the deploy is done.
func TestBlueGreenPromotesItself(t *testing.T) {
	dt := newDeployTest(t)
	zero := int32(0)
	bg := &manifest.BlueGreen{AutoPromotionSeconds: 2, ScaleDownDelaySeconds: &zero}
	dt.deploy(blueGreenManifest(dt.lease, "nginx:1.26", bg))
	dt.waitRevision(dt.lease, 1)
	dt.deploy(blueGreenManifest(dt.lease, "nginx:1.27", bg))
	lease := dt.waitRevision(dt.lease, 2)
	require.Equal(t, api.PhaseActive, lease.Phase, lease.LastError)
	green := dt.hashOf("nginx:1.27")
	assert.Equal(t, map[string]string{"web": green, "web-preview": green}, dt.selects())
	_, available := dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.26": 0, "nginx:1.27": 4}, available)
	last := lease.History[len(lease.History)-1]
	require.NotNil(t, last.Tree)
	assert.Len(t, last.Tree.Find(plan.OpRollOut, "web").ByOp(plan.OpBlueGreenStep), 5)
	last.Tree.Walk(func(n *plan.Node, _ int) { assert.Equal(t, plan.Done, n.State, n.Text) })
}

// A pre-promotion HTTP check passes (promotion then comes by itself); the
// post-promotion check finds a high error rate: the active Service
// switches back to the old version, still up, and the lease records why.
func TestBlueGreenPostPromotionAnalysisSwitchesBack(t *testing.T) {
	var checks atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checks.Add(1)
		if r.URL.Path == "/metrics.json" {
			_, _ = w.Write([]byte(`{"errorRate": 0.5}`))
		}
	}))
	t.Cleanup(srv.Close)
	dt := newDeployTestWith(t, func(a *activities.Activities) { a.HTTPCheckAllow = []string{"127.0.0.1/32"} }) // the test's own check endpoint
	delay := int32(600)
	bg := &manifest.BlueGreen{
		AutoPromotionSeconds: 1, ScaleDownDelaySeconds: &delay,
		PrePromotionAnalysis:  &manifest.Analysis{HTTP: &manifest.HTTPCheck{URL: srv.URL + "/healthz"}, SuccessCondition: "result == 200"},
		PostPromotionAnalysis: &manifest.Analysis{HTTP: &manifest.HTTPCheck{URL: srv.URL + "/metrics.json", JSONField: "errorRate"}, SuccessCondition: "result < 0.05", Interval: "1s", Count: 2},
	}
	dt.deploy(blueGreenManifest(dt.lease, "nginx:1.26", bg))
	dt.waitRevision(dt.lease, 1)
	blue := dt.hashOf("nginx:1.26")
	pods := dt.pods()

	dt.deploy(blueGreenManifest(dt.lease, "nginx:1.27", bg))
	lease := dt.waitRevision(dt.lease, 2)
	assert.Equal(t, api.PhaseFailed, lease.Phase)
	assert.Contains(t, lease.History[len(lease.History)-1].Outcome, "post-promotion analysis failed: 1 measured: 0 successful, 1 failed")
	assert.Equal(t, blue, dt.selects()["web"], "the active Service selects the old version again")
	_, available := dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.26": 4, "nginx:1.27": 0}, available)
	assert.Equal(t, pods, dt.pods(), "the old version's pods are the ones it had: switching back created none")
	assert.GreaterOrEqual(t, checks.Load(), int32(2), "both checks ran")

	roll := lease.History[len(lease.History)-1].Tree.Find(plan.OpRollOut, "web")
	require.NotNil(t, roll)
	var texts []string
	var states []plan.State
	for _, s := range roll.Children {
		texts, states = append(texts, s.Text), append(states, s.State)
	}
	assert.Equal(t, []string{
		"step 1/7: bring up the preview: 4 replicas of nginx:1.27, Service/web-preview selecting them",
		"step 2/7: pre-promotion http check " + srv.URL + "/healthz (1× every 10s)",
		"step 3/7: await promotion (automatic after 1s, or deployflow promote)",
		"step 4/7: scale the new version to 4 replicas",
		"step 5/7: switch Service/web to the new version",
		"step 6/7: post-promotion http check " + srv.URL + "/metrics.json (2× every 1s)",
		"step 7/7: keep the old version 600s for undo, then scale it down",
	}, texts)
	assert.Equal(t, []plan.State{plan.Done, plan.Done, plan.Done, plan.Done, plan.Done, plan.Failed, plan.Skipped}, states)
}

// A blue-green superseded during its preview: the next one switches from
// the version the active Service selects, never from the unpromoted
// preview (though it is the newest available ReplicaSet); operators' controls
// that do not fit a blue-green are refused with the reason.
func TestBlueGreenSupersededInItsPreviewSwitchesFromTheActiveVersion(t *testing.T) {
	dt := newDeployTest(t)
	zero := int32(0)
	bg := &manifest.BlueGreen{ScaleDownDelaySeconds: &zero}
	dt.deploy(blueGreenManifest(dt.lease, "nginx:1.26", bg))
	dt.waitRevision(dt.lease, 1)
	blue := dt.hashOf("nginx:1.26")

	dt.deploy(blueGreenManifest(dt.lease, "nginx:1.27", bg))
	dt.waitBlueGreen("step 2/5: await promotion", 60*time.Second)
	dt.deploy(blueGreenManifest(dt.lease, "nginx:1.28", bg)) // supersedes the unpromoted 1.27
	testenv.Eventually(t, 3*time.Minute, pollQuery, "the new preview never came up", func() (bool, string) {
		list, err := dt.env.Kube.AppsV1().ReplicaSets(manifest.Namespace(dt.lease)).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
		if err != nil {
			return false, err.Error()
		}
		hash := ""
		for _, rs := range list.Items {
			if rs.Spec.Template.Spec.Containers[0].Image == "nginx:1.28" {
				hash = rs.Labels[manifest.PodTemplateHashLabel]
			}
		}
		s := dt.selects()
		return hash != "" && s["web-preview"] == hash, fmt.Sprint(s)
	})
	dt.waitBlueGreen("step 2/5: await promotion", 30*time.Second)
	assert.Equal(t, blue, dt.selects()["web"], "the active Service still selects 1.26, not the superseded preview")
	spec, _ := dt.byImage()
	assert.Equal(t, map[string]int32{"nginx:1.26": 4, "nginx:1.27": 0, "nginx:1.28": 4}, spec, "the superseded preview is scaled down")

	err := dt.rolloutUpdate(api.UpdateRestart)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "a blue-green changes its template by a new deploy")
	err = dt.rolloutUpdate(api.UpdateUndo, api.UndoRequest{ToRevision: 2})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "a blue-green switches back to its stable version, revision 1, which is still up")

	require.NoError(t, dt.promote(false))
	st := dt.waitRevision(dt.lease, 3)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	green := dt.hashOf("nginx:1.28")
	assert.Equal(t, map[string]string{"web": green, "web-preview": green}, dt.selects())
}
