package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/worker/testenv"
)

// deployTest is one lease on the real local stack.
type deployTest struct {
	approvalTimeout int
	// healthInterval is the lease's healthIntervalSeconds (5 unless a test
	// sets it; 0 is the default safety net, an hour). Each tick is a
	// workflow task and a read of the lease on the servers every test
	// shares: at 1s, as it was, a hundred leases' ticks were a large part
	// of the live phase's CPU, itself CPU-bound; a test that needs a change
	// seen sooner runs an observer.
	healthInterval int
	t              *testing.T
	env            *testenv.Env
	tq             string
	acts           *activities.Activities
	lease          string
	owner          string
}

func newDeployTest(t *testing.T) *deployTest { return newDeployTestWith(t, nil) }

// newDeployTestWith is newDeployTest with the worker's activities
// configured (testenv.WorkerWith).
func newDeployTestWith(t *testing.T, configure func(*activities.Activities)) *deployTest {
	env := testenv.Get(t)
	dt := &deployTest{t: t, env: env, tq: env.WorkerWith(t, configure), acts: env.Activities(),
		lease: testenv.ShortName("lease"), owner: "acme", healthInterval: 5}
	dt.createLease(dt.lease, dt.owner)
	return dt
}

func (dt *deployTest) createLease(id, owner string) {
	dt.t.Helper()
	_, err := dt.acts.Leases.Create(context.Background(), id, owner)
	require.NoError(dt.t, err)
	dt.t.Cleanup(func() {
		ctx := context.Background()
		_ = dt.acts.Hostnames.ReleaseAll(ctx, id)
		_ = dt.acts.IPs.ReleaseAll(ctx, id)
		_ = dt.env.Kube.CoreV1().Namespaces().Delete(ctx, manifest.Namespace(id), metav1.DeleteOptions{})
		_ = dt.env.Dynamic.Resource(crds.Leases).Delete(ctx, id, metav1.DeleteOptions{})
	})
}

// pollQuery is how often a test asks a workflow (a query, an update that
// may not be taken yet): each question is a workflow task on the Temporal
// server, which the tests side by side share; four a second is enough to
// see a state that lasts the seconds a test gives it.
const pollQuery = 250 * time.Millisecond

// twoServices is web (HTTP on a hostname) and api (on an IP endpoint).
//
// web's progress deadline is 5s when its pods never turn Ready (the test
// wants the deploy to fail, soon), and two minutes otherwise: with the rest
// of the suite beside it, pods may take longer than 5s to turn Ready.
func twoServices(lease, host, webImage string, podAnnotations map[string]string, neverReady bool) manifest.Manifest {
	replicas := int32(3)
	deadline := int32(120)
	if neverReady {
		deadline = 5
	}
	web := manifest.Service{
		Name: "web", Image: webImage, Replicas: &replicas,
		Ports:          []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{host}}}}},
		PodAnnotations: podAnnotations,
		Rollout:        &manifest.Rollout{ProgressDeadlineSeconds: &deadline},
	}
	if neverReady {
		web.PodLabels = map[string]string{"deployflow.dev/never-ready": "true"}
	}
	api := manifest.Service{
		Name: "api", Image: "ghcr.io/acme/api:1.0", Replicas: &replicas,
		Ports: []manifest.Port{{Port: 8080, Expose: &manifest.Expose{IP: "public"}}},
	}
	return manifest.Manifest{Lease: lease, Services: []manifest.Service{web, api}}
}

// deploy sends m with Update-with-Start, as `deployflow deploy` does, and
// returns the lease's workflow run.
func (dt *deployTest) deploy(m manifest.Manifest) client.WorkflowRun {
	dt.t.Helper()
	run, err := dt.tryDeploy(m)
	require.NoError(dt.t, err)
	return run
}

// tryDeploy is deploy without assertions, for the test's goroutines (which
// must not call require): the caller checks the error.
//
// A workflow task timed out on a loaded machine (CI run 57, on PostgreSQL)
// leaves the run refusing updates until its next task ("Workflow Task in
// failed state": Temporal's WorkflowNotReady, which the CLI retries as
// transient); so does this, for up to two minutes, with a new start
// operation each time (one is used once). So is "Namespace default is not
// found", which the loaded dev server answered a start with once (CI run
// 64) and the CLI retries too (starter/client.go, transient).
func (dt *deployTest) tryDeploy(m manifest.Manifest) (client.WorkflowRun, error) {
	ctx := context.Background()
	var start client.WithStartWorkflowOperation
	var err error
	// One update ID for every attempt: an attempt the server admitted
	// although its caller timed out is joined by the next one, not sent
	// again as another deploy.
	updateID := uuid.NewString()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		start = dt.env.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: api.DeployWorkflowID(m.Lease), TaskQueue: dt.tq,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, api.DeployWorkflow, api.DeployInput{Manifest: m, Trigger: "test", HealthIntervalSeconds: dt.healthInterval, DegradedAfterSeconds: 3,
			ApprovalTimeoutSeconds: dt.approvalTimeout})
		var h client.WorkflowUpdateHandle
		h, err = dt.env.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{
				WorkflowID: api.DeployWorkflowID(m.Lease), UpdateName: api.UpdateDeploy, UpdateID: updateID,
				Args: []any{api.DeployRequest{Manifest: m, Trigger: "test"}}, WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		if err == nil {
			var st api.DeployStatus
			err = h.Get(ctx, &st)
		}
		var notReady *serviceerror.WorkflowNotReady
		var nsNotFound *serviceerror.NamespaceNotFound
		// A loaded worker that has not taken the update within the SDK's
		// long poll: CI runs 87 and 88 failed the soak on it ("Timeout or
		// cancellation waiting for update").
		var pollTimedOut *client.WorkflowUpdateServiceTimeoutOrCanceledError
		transient := err != nil && (errors.As(err, &notReady) || errors.As(err, &nsNotFound) || errors.As(err, &pollTimedOut) ||
			strings.Contains(err.Error(), "Workflow Task in failed state") || strings.Contains(err.Error(), "Namespace default is not found"))
		if err == nil || !transient || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("deploy %s: %w", m.Lease, err)
	}
	run, err := start.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("deploy %s: %w", m.Lease, err)
	}
	dt.t.Cleanup(func() {
		_ = dt.env.Temporal.TerminateWorkflow(context.Background(), api.DeployWorkflowID(m.Lease), "", "test over")
	})
	return run, nil
}

// status is the lease's deploy status, as its workflow's query answers it.
// The query waits as long as the CLI's does (env.Patient: CI's PostgreSQL
// phase failed the soak twice on a paused lease whose busy workflow took
// longer than the SDK's 10s to answer, every time it was asked); one that
// met a run before its first task (WorkflowNotReady) or that the server
// gave up on all the same is asked again, for up to a minute more.
func (dt *deployTest) status(lease string) (api.DeployStatus, error) {
	var st api.DeployStatus
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(pollQuery) {
		v, err := dt.env.Patient().QueryWorkflow(context.Background(), api.DeployWorkflowID(lease), "", api.QueryStatus)
		if err == nil {
			return st, v.Get(&st)
		}
		var slow *serviceerror.DeadlineExceeded
		var notReady *serviceerror.WorkflowNotReady
		if !(errors.As(err, &slow) || errors.As(err, &notReady) || errors.Is(err, context.DeadlineExceeded)) || time.Now().After(deadline) {
			return api.DeployStatus{}, err
		}
	}
}

// waitRevision waits until deploy number rev of the lease has finished:
// within three minutes, whatever the rest of the suite beside it does
// (no test's deploy takes a minute alone).
func (dt *deployTest) waitRevision(lease string, rev int64) api.DeployStatus {
	dt.t.Helper()
	var st api.DeployStatus
	testenv.Eventually(dt.t, 3*time.Minute, pollQuery, fmt.Sprintf("deploy %d of %s never finished", rev, lease), func() (bool, string) {
		s, err := dt.status(lease)
		if err != nil {
			return false, "query: " + err.Error()
		}
		st = s
		if len(s.History) > 0 && s.History[len(s.History)-1].Revision >= rev && !s.Pending && s.Phase != api.PhaseDeploying {
			return true, ""
		}
		return false, fmt.Sprintf("phase %s, pending %v, %d history entries, last error %q; %s", s.Phase, s.Pending, len(s.History), s.LastError, dt.rolloutsSeen(lease, s))
	})
	return st
}

// rolloutsSeen is what the lease's rollouts report, for a test's failure
// message.
func (dt *deployTest) rolloutsSeen(lease string, s api.DeployStatus) string {
	var out []string
	for _, svc := range s.Services {
		v, err := dt.env.Patient().QueryWorkflow(context.Background(), api.RolloutWorkflowID(manifest.Namespace(lease), svc), "", api.QueryStatus)
		var rs api.RolloutStatus
		if err == nil {
			err = v.Get(&rs)
		}
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("rollout %s: %v", svc, err))
		case rs.Canary != nil:
			out = append(out, fmt.Sprintf("rollout %s: %s; canary %s", svc, rs.Step, rs.Canary.Summary))
		default:
			out = append(out, fmt.Sprintf("rollout %s: %s %s", svc, rs.Step, rs.Message))
		}
	}
	return strings.Join(out, "; ")
}

func (dt *deployTest) kubectl(args ...string) string {
	dt.t.Helper()
	out, err := exec.Command(dt.env.Stack.Bin("kubectl"), append([]string{"--kubeconfig", dt.env.Stack.Kubeconfig()}, args...)...).CombinedOutput()
	require.NoError(dt.t, err, "kubectl %v: %s", args, out)
	return string(out)
}

func (dt *deployTest) available(ns, svc string) (desired, available int32, images map[string]int32) {
	dt.t.Helper()
	list, err := dt.env.Kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=" + svc})
	require.NoError(dt.t, err)
	images = map[string]int32{}
	for _, rs := range list.Items {
		desired += *rs.Spec.Replicas
		available += rs.Status.AvailableReplicas
		images[rs.Spec.Template.Spec.Containers[0].Image] += rs.Status.AvailableReplicas
	}
	return desired, available, images
}

func TestDeployTwoServicesWithHostnameAndIP(t *testing.T) {
	dt := newDeployTest(t)
	host := dt.lease + ".apps.example.com"
	dt.deploy(twoServices(dt.lease, host, "nginx:1.26", nil, false))
	st := dt.waitRevision(dt.lease, 1)

	require.Equal(t, api.PhaseActive, st.Phase, "last error: %s", st.LastError)
	assert.Equal(t, map[string]string{"web": activities.ChangeRollout, "api": activities.ChangeRollout}, st.Classes)
	ns := manifest.Namespace(dt.lease)
	for _, svc := range []string{"web", "api"} {
		desired, available, _ := dt.available(ns, svc)
		assert.Equal(t, int32(3), desired, svc)
		assert.Equal(t, int32(3), available, svc)
	}
	assert.Contains(t, dt.kubectl("get", "svc", "-n", ns), "web")
	assert.Contains(t, dt.kubectl("get", "ingress", "-n", ns, "-o", "wide"), host)
	assert.Contains(t, dt.kubectl("get", "hostnamereservations"), host)
	ip := st.IPs["public"]
	require.NotEmpty(t, ip, "the IP endpoint got a declared IP")
	assert.Contains(t, dt.kubectl("get", "ipreservations"), ip)
	lb, err := dt.env.Kube.CoreV1().Services(ns).Get(context.Background(), "api-ip-public", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ServiceTypeLoadBalancer, lb.Spec.Type)
	assert.Equal(t, ip, lb.Annotations[manifest.DeclaredIPAnnotation])

	// The same manifest again writes nothing new: every class is no-op.
	dt.deploy(twoServices(dt.lease, host, "nginx:1.26", nil, false))
	st = dt.waitRevision(dt.lease, 2)
	assert.Equal(t, map[string]string{"web": activities.ChangeNone, "api": activities.ChangeNone}, st.Classes)
}

func TestHostnameOfAnotherOwnerFailsWritingNothing(t *testing.T) {
	dt := newDeployTest(t)
	host := dt.lease + ".shared.example.com"
	dt.deploy(twoServices(dt.lease, host, "nginx:1.26", nil, false))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase)

	other := dt.lease + "-b"
	dt.createLease(other, "globex")
	dt.deploy(twoServices(other, host, "nginx:1.26", nil, false))
	st := dt.waitRevision(other, 1)
	assert.Equal(t, api.PhaseFailed, st.Phase)
	assert.Contains(t, st.LastError, "HostnameConflict")
	assert.Contains(t, st.LastError, "hostname "+host+" is held by lease "+dt.lease+" of owner acme")

	_, err := dt.env.Kube.CoreV1().Namespaces().Get(context.Background(), manifest.Namespace(other), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no namespace for the refused lease")
	ips, err := dt.acts.IPs.Declared(context.Background(), other)
	require.NoError(t, err)
	assert.Empty(t, ips, "no IP reserved for the refused lease")
	held, err := dt.acts.Hostnames.Held(context.Background(), dt.lease)
	require.NoError(t, err)
	assert.Equal(t, []string{host}, held, "the holder keeps its hostname")
}

func TestTenLeasesRaceForOneHostname(t *testing.T) {
	dt := newDeployTest(t)
	host := dt.lease + ".race.example.com"
	var leases []string
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("%s-%d", dt.lease, i)
		dt.createLease(id, fmt.Sprintf("owner-%d", i))
		leases = append(leases, id)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(leases))
	for i, id := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one := int32(1)
			_, errs[i] = dt.tryDeploy(manifest.Manifest{Lease: id, Services: []manifest.Service{{Name: "web", Image: "nginx:1.27", Replicas: &one,
				Ports: []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: []string{host}}}}}}}})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	winners, conflicts := 0, 0
	for _, id := range leases {
		st := dt.waitRevision(id, 1)
		switch st.Phase {
		case api.PhaseActive:
			winners++
		case api.PhaseFailed:
			assert.Contains(t, st.LastError, "HostnameConflict")
			conflicts++
		}
	}
	assert.Equal(t, 1, winners, "exactly one lease gets the hostname")
	assert.Equal(t, 9, conflicts)
}

func TestImageUpdateAndFailingUpdateKeepsTheLastGoodVersion(t *testing.T) {
	dt := newDeployTest(t)
	host := dt.lease + ".apps.example.com"
	ns := manifest.Namespace(dt.lease)
	dt.deploy(twoServices(dt.lease, host, "nginx:1.26", nil, false))
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase)
	ip := st.IPs["public"]

	// An image update rolls out.
	dt.deploy(twoServices(dt.lease, host, "nginx:1.27", map[string]string{"deployflow.dev/ready-after": "500ms"}, false))
	st = dt.waitRevision(dt.lease, 2)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, activities.ChangeRollout, st.Classes["web"])
	assert.Equal(t, activities.ChangeNone, st.Classes["api"])
	_, available, images := dt.available(ns, "web")
	assert.Equal(t, int32(3), available)
	assert.Equal(t, int32(3), images["nginx:1.27"])

	// A failing update (pods never ready) ends with the previous version
	// fully available and the hostname and IP intact.
	dt.deploy(twoServices(dt.lease, host, "nginx:1.28-broken", nil, true))
	st = dt.waitRevision(dt.lease, 3)
	assert.Equal(t, api.PhaseFailed, st.Phase)
	assert.Contains(t, st.History[len(st.History)-1].Outcome, "ProgressDeadlineExceeded")
	desired, available, images := dt.available(ns, "web")
	assert.Equal(t, int32(3), available, "the last good version is fully available")
	assert.Equal(t, int32(3), images["nginx:1.27"])
	assert.Equal(t, int32(3), desired, "nothing of the failed version is left running")
	held, err := dt.acts.Hostnames.Held(context.Background(), dt.lease)
	require.NoError(t, err)
	assert.Equal(t, []string{host}, held)
	ips, err := dt.acts.IPs.Declared(context.Background(), dt.lease)
	require.NoError(t, err)
	assert.Equal(t, ip, ips["public"], "the declared IP is kept")
}

func TestClosingTheLeaseMidRolloutTearsEverythingDown(t *testing.T) {
	dt := newDeployTest(t)
	host := dt.lease + ".apps.example.com"
	ns := manifest.Namespace(dt.lease)
	run := dt.deploy(twoServices(dt.lease, host, "nginx:1.26", map[string]string{"deployflow.dev/ready-after": "30s"}, false))
	require.Eventually(t, func() bool {
		desired, _, _ := dt.available(ns, "web")
		return desired > 0
	}, 2*time.Minute, 100*time.Millisecond, "the rollout never started")

	_, err := dt.acts.Leases.Close(context.Background(), dt.lease)
	require.NoError(t, err)
	var st api.DeployStatus
	require.NoError(t, run.Get(context.Background(), &st), "the lease's workflow ends with the teardown")
	assert.Equal(t, api.PhaseTornDown, st.Phase)

	_, err = dt.env.Kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the lease's namespace is gone")
	held, err := dt.acts.Hostnames.Held(context.Background(), dt.lease)
	require.NoError(t, err)
	assert.Empty(t, held)
	ips, err := dt.acts.IPs.Declared(context.Background(), dt.lease)
	require.NoError(t, err)
	assert.Empty(t, ips)
}

func TestBadManifestIsRefusedWritingNothing(t *testing.T) {
	dt := newDeployTest(t)
	m := twoServices(dt.lease, "*.wild.example.com", "nginx:1.26", nil, false)
	run, err := dt.env.Temporal.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: api.DeployWorkflowID(dt.lease), TaskQueue: dt.tq,
	}, api.DeployWorkflow, api.DeployInput{Manifest: m})
	require.NoError(t, err)
	err = run.Get(context.Background(), nil)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	assert.Equal(t, api.ErrInvalidManifest, appErr.Type())
	assert.Contains(t, appErr.Error(), "services[0].ports[0].expose.http.hostnames[0]")
	_, err = dt.env.Kube.CoreV1().Namespaces().Get(context.Background(), manifest.Namespace(dt.lease), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
}

// A manifest that arrives mid-rollout supersedes it after the current step;
// several arriving together are coalesced to the newest.
func TestNewerManifestSupersedesARolloutInProgress(t *testing.T) {
	dt := newDeployTest(t)
	host := dt.lease + ".apps.example.com"
	ns := manifest.Namespace(dt.lease)
	dt.deploy(twoServices(dt.lease, host, "nginx:1.26", map[string]string{"deployflow.dev/ready-after": "60s"}, false))
	require.Eventually(t, func() bool {
		desired, _, _ := dt.available(ns, "web")
		return desired > 0
	}, 2*time.Minute, 50*time.Millisecond, "the first rollout never started")

	dt.deploy(twoServices(dt.lease, host, "nginx:1.27", nil, false))
	dt.deploy(twoServices(dt.lease, host, "nginx:1.28", nil, false))
	var st api.DeployStatus
	require.Eventually(t, func() bool {
		s, err := dt.status(dt.lease)
		st = s
		return err == nil && s.Phase == api.PhaseActive && !s.Pending
	}, 90*time.Second, 100*time.Millisecond, "never Active on the newest manifest (last %+v)", st)

	_, available, images := dt.available(ns, "web")
	assert.Equal(t, int32(3), available)
	assert.Equal(t, int32(3), images["nginx:1.28"], "the newest manifest wins")
	assert.Zero(t, images["nginx:1.27"], "the middle manifest was coalesced away")
	// Which manifests were deployed, from the lease's own record: 1.26
	// (superseded) then 1.28. Were coalescing broken, 1.27 would be there.
	var deployed []string
	for _, r := range st.History {
		deployed = append(deployed, r.Image["web"]+" "+r.Outcome)
	}
	assert.Equal(t, []string{"nginx:1.26 Superseded by a newer manifest", "nginx:1.28 Succeeded"}, deployed)
	list, err := dt.env.Kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	require.NoError(t, err)
	for _, rs := range list.Items {
		assert.NotEqual(t, "nginx:1.27", rs.Spec.Template.Spec.Containers[0].Image, "no ReplicaSet was ever made for the coalesced manifest")
	}
}

// The same manifest sent again while it deploys joins the deploy in progress
// (found by make chaos: the CLI's update-with-start, its update handled in a
// later workflow task than the start, superseded the deploy of its own input
// and rolled the manifest out twice). Here the second request is sent by
// hand once the first deploy's rollout has begun, while its pods are not
// Ready yet: they turn Ready 20s after they start, which leaves the test
// time to see it under load (with 3s, the official CI once saw the deploy
// finish before its poll did).
func TestTheSameManifestSentAgainJoinsItsDeploy(t *testing.T) {
	dt := newDeployTest(t)
	host := dt.lease + ".apps.example.com"
	m := twoServices(dt.lease, host, "nginx:1.27", map[string]string{"deployflow.dev/ready-after": "20s"}, false)
	dt.deploy(m)
	testenv.Eventually(t, 2*time.Minute, pollQuery, "the rollout never began", func() (bool, string) {
		_, av, _ := dt.available(manifest.Namespace(dt.lease), "web")
		st, err := dt.status(dt.lease)
		return err == nil && st.Phase == api.PhaseDeploying && av == 0 && dt.rolloutsSeen(dt.lease, st) != "", fmt.Sprint(st.Phase)
	})
	h, err := dt.env.Temporal.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{
		WorkflowID: api.DeployWorkflowID(dt.lease), UpdateName: api.UpdateDeploy,
		Args: []any{api.DeployRequest{Manifest: m, Trigger: "test"}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	var answer api.DeployStatus
	require.NoError(t, h.Get(context.Background(), &answer))
	assert.Equal(t, int64(0), answer.Revision, "the caller waits for the deploy after revision 0: the one in progress")
	assert.False(t, answer.Pending)

	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, int64(1), st.Revision, "deployed twice")
	require.Len(t, st.History, 1)
	assert.Equal(t, "Succeeded", st.History[0].Outcome)
}
