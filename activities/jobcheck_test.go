package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"

	"github.com/deployflow/deployflow/internal/manifest"
)

// Issue 20.6: an analysis Job is bounded. Its pod mounts no service
// account token and gets no Service links; and when its activity is
// cancelled (the rollout aborted or ended: a heartbeat to a closed
// workflow cancels it) the Job is deleted rather than left running to its
// deadline. Before, it ran on.
func TestACancelledJobCheckDeletesItsJob(t *testing.T) {
	kc := fake.NewClientset()
	a := &Activities{Kube: kc}
	ctx, cancel := context.WithCancel(context.Background())
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	env.RegisterActivity(a.RunJob)
	time.AfterFunc(1500*time.Millisecond, cancel)
	_, err := env.ExecuteActivity(a.RunJob, JobCheckInput{Namespace: "lease-a", Service: "web", Name: "web-check-1", Job: manifest.JobCheck{Image: "busybox:1.36"}})
	require.Error(t, err, "cancelled while the Job runs")
	_, err = kc.BatchV1().Jobs("lease-a").Get(context.Background(), "web-check-1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Job is deleted with its cancelled check: %v", err)
}

func TestAJobChecksPodMountsNoToken(t *testing.T) {
	kc := fake.NewClientset()
	a := &Activities{Kube: kc}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	env.RegisterActivity(a.RunJob)
	created := make(chan struct{})
	go func() {
		for range 100 {
			if l, _ := kc.BatchV1().Jobs("lease-a").List(context.Background(), metav1.ListOptions{}); l != nil && len(l.Items) > 0 {
				spec := l.Items[0].Spec.Template.Spec
				assert.False(t, *spec.AutomountServiceAccountToken)
				assert.False(t, *spec.EnableServiceLinks)
				assert.Equal(t, int64(manifest.DefaultJobDeadlineSeconds), *l.Items[0].Spec.ActiveDeadlineSeconds)
				close(created)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, _ = env.ExecuteActivity(a.RunJob, JobCheckInput{Namespace: "lease-a", Service: "web", Name: "web-check-2", Job: manifest.JobCheck{Image: "busybox:1.36"}})
	select {
	case <-created:
	case <-time.After(5 * time.Second):
		t.Fatal("no Job was created")
	}
}

// Issue 35.4: an analysis Job's pod runs under every Pod Security level,
// restricted included, judged by Pod Security Admission's own checks (the
// code the API server runs). Before, its pod set no securityContext (root,
// privilege escalation, the runtime's capabilities, no seccomp profile),
// and a lease namespace enforcing restricted refused every analysis Job's
// pod: the check never ran and the rollout waited out its deadline.
func TestAnAnalysisJobsPodPassesTheRestrictedPodSecurityLevel(t *testing.T) {
	job := analysisJob(JobCheckInput{Namespace: "lease-a", Service: "web", Name: "web-check-1",
		Job: manifest.JobCheck{Image: "busybox:1.36", Command: []string{"wget", "-q", "-O-", "http://web"}}})
	eval, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	require.NoError(t, err)
	for _, level := range []psaapi.Level{psaapi.LevelBaseline, psaapi.LevelRestricted} {
		res := psapolicy.AggregateCheckResults(eval.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()},
			&job.Spec.Template.ObjectMeta, &job.Spec.Template.Spec))
		assert.True(t, res.Allowed, "%s: %s: %s", level, res.ForbiddenReason(), res.ForbiddenDetail())
	}
	assert.False(t, *job.Spec.Template.Spec.AutomountServiceAccountToken, "no API token")
	assert.False(t, *job.Spec.Template.Spec.EnableServiceLinks, "no Service links")
}

// Issue 35: a rollout started by hand carries its analysis Jobs without a
// lease's plan to check them against the operator's bounds, and its Job
// took any activeDeadlineSeconds and any pod annotation (a CNI's IP pin, a
// scraper's opt-in). The activity that writes the Job checks them: it is
// refused, typed and naming the field, and nothing is written.
func TestAnAnalysisJobIsHeldToTheOperatorsBoundsWhereItIsWritten(t *testing.T) {
	kc := fake.NewClientset()
	a := &Activities{Kube: kc, Limits: manifest.Limits{MaxJobSeconds: 600}}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a.RunJob)
	long := int64(86400)
	_, err := env.ExecuteActivity(a.RunJob, JobCheckInput{Namespace: "lease-a", Service: "web", Name: "web-check-1", Job: manifest.JobCheck{
		Image: "busybox:1.36", ActiveDeadlineSeconds: &long,
		PodAnnotations: map[string]string{"cni.projectcalico.org/ipAddrs": `["10.0.0.9"]`, "team": "a"}}})
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, ErrInvalidInput, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), "job.activeDeadlineSeconds: 86400: this provider runs an analysis Job for at most 600 seconds")
	assert.Contains(t, err.Error(), `job.podAnnotations["cni.projectcalico.org/ipAddrs"]`)
	assert.NotContains(t, err.Error(), "team")
	l, err := kc.BatchV1().Jobs("lease-a").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, l.Items, "no Job was written")
}
