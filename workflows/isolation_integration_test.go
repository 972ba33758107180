package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/worker/app"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Tenant isolation and correctness on the real local stack (issue 8). Each
// test names the defect it guards; each fails on the code before its fix.

func web(lease, svc, image string, replicas int32, hosts ...string) manifest.Manifest {
	s := manifest.Service{Name: svc, Image: image, Replicas: &replicas}
	if len(hosts) > 0 {
		s.Ports = []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: &manifest.HTTPExpose{Hostnames: hosts}}}}
	}
	return manifest.Manifest{Lease: lease, Services: []manifest.Service{s}}
}

func slow(m manifest.Manifest, after string) manifest.Manifest {
	for i := range m.Services {
		m.Services[i].PodAnnotations = map[string]string{"deployflow.dev/ready-after": after}
	}
	return m
}

// Guards 8.1: lease a / service b-c and lease a-b / service c shared the
// rollout ID rollout-lease-a-b-c, so the second tenant's deploy failed with
// "child workflow execution already started".
func TestLeasesWhoseNamesJoinAlikeDeployIndependently(t *testing.T) {
	dt := newDeployTest(t)
	other := dt.lease + "-b"
	dt.createLease(other, "globex")
	dt.deploy(slow(web(dt.lease, "b-c", "nginx:1.27", 2), "2s"))
	dt.deploy(slow(web(other, "c", "nginx:1.26", 2), "2s"))
	for lease, image := range map[string]string{dt.lease: "nginx:1.27", other: "nginx:1.26"} {
		st := dt.waitRevision(lease, 1)
		require.Equal(t, api.PhaseActive, st.Phase, "lease %s: %s", lease, st.LastError)
		svc := map[string]string{dt.lease: "b-c", other: "c"}[lease]
		_, available, images := dt.available(manifest.Namespace(lease), svc)
		assert.Equal(t, int32(2), available, lease)
		assert.Equal(t, int32(2), images[image], "lease %s runs its own image", lease)
	}
}

// startStandalone starts a standalone RolloutWorkflow on tq.
func startStandalone(t *testing.T, env *testenv.Env, tq, ns, svc, image string, replicas int32, annotations map[string]string) client.WorkflowRun {
	t.Helper()
	in := api.RolloutInput{Namespace: ns, Service: svc}
	in.Deployment.Spec.Replicas = &replicas
	in.Deployment.Spec.Template.Annotations = annotations
	in.Deployment.Spec.Template.Spec.Containers = []corev1.Container{{Name: svc, Image: image}}
	run, err := env.Temporal.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: api.RolloutWorkflowID(ns, svc) + ":" + testenv.ShortName("t"), TaskQueue: tq,
	}, api.RolloutWorkflow, in)
	require.NoError(t, err)
	return run
}

// workerWith runs an in-process worker with these activities on a task
// queue of its own.
func workerWith(t *testing.T, env *testenv.Env, acts *activities.Activities) string {
	t.Helper()
	tq := testenv.Name(t, "tq")
	w := worker.New(env.Temporal, tq, worker.Options{WorkerStopTimeout: 2 * time.Second})
	app.Register(w, acts)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return tq
}

func failureType(t *testing.T, err error) string {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an application error, got %v", err)
	return appErr.Type()
}

// Guards 8.2: RolloutWorkflow accepted any namespace and created it, so
// whoever could start a workflow could run pods in kube-system with the
// worker's credentials.
func TestRolloutsStayInDeployflowsNamespaces(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	acts := env.Activities()
	listed := testenv.Name(t, "listed")
	acts.RolloutNamespaces = []string{listed}
	tq := workerWith(t, env, acts)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(ctx, listed, metav1.DeleteOptions{}) })

	// kube-system exists and is not deployflow's.
	err := startStandalone(t, env, tq, "kube-system", "evil", "nginx:1.27", 1, nil).Get(ctx, nil)
	assert.Equal(t, activities.ErrNamespaceNotAllowed, failureType(t, err))
	rss, err := env.Kube.AppsV1().ReplicaSets("kube-system").List(ctx, metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=evil"})
	require.NoError(t, err)
	assert.Empty(t, rss.Items, "nothing was written in kube-system")

	// A namespace that does not exist is not created.
	missing := testenv.Name(t, "nope")
	err = startStandalone(t, env, tq, missing, "web", "nginx:1.27", 1, nil).Get(ctx, nil)
	assert.Equal(t, activities.ErrNamespaceNotAllowed, failureType(t, err))
	_, err = env.Kube.CoreV1().Namespaces().Get(ctx, missing, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the namespace was not created")

	// An unlabelled namespace, like a lease namespace someone else made.
	plain := testenv.Name(t, "plain")
	_, err = env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plain}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(ctx, plain, metav1.DeleteOptions{}) })
	err = startStandalone(t, env, tq, plain, "web", "nginx:1.27", 1, nil).Get(ctx, nil)
	assert.Equal(t, activities.ErrNamespaceNotAllowed, failureType(t, err))

	// A namespace the worker lists (--rollout-namespaces) is usable.
	var res api.RolloutResult
	require.NoError(t, startStandalone(t, env, tq, listed, "web", "nginx:1.27", 2, nil).Get(ctx, &res))
	assert.Equal(t, int32(2), res.AvailableReplicas)
}

// Guards 8.3: deployflow's ReplicaSets carried the pods' app label and no
// controller owner, so a user's Deployment selecting app: web adopted them
// and scaled them; and nothing of a lease was collected with its record.
func TestLeaseObjectsAreOwnedAndNotAdoptedByAUserDeployment(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	ns := manifest.Namespace(dt.lease)
	dt.deploy(web(dt.lease, "web", "nginx:1.27", 3, dt.lease+".apps.example.com"))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase)

	l, err := dt.acts.Leases.Get(ctx, dt.lease)
	require.NoError(t, err)
	owned := func(refs []metav1.OwnerReference) bool {
		for _, r := range refs {
			if r.Kind == crds.KindLease && r.Name == dt.lease && string(r.UID) == l.UID && r.Controller != nil && *r.Controller {
				return true
			}
		}
		return false
	}
	nsObj, err := dt.env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, owned(nsObj.OwnerReferences), "the namespace is owned by the lease record")
	svc, err := dt.env.Kube.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, owned(svc.OwnerReferences), "the Service is owned by the lease record")
	ing, err := dt.env.Kube.NetworkingV1().Ingresses(ns).Get(ctx, manifest.IngressName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, owned(ing.OwnerReferences), "the Ingress is owned by the lease record")
	rss, err := dt.env.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	require.NoError(t, err)
	require.Len(t, rss.Items, 1)
	ours := rss.Items[0]
	assert.True(t, owned(ours.OwnerReferences), "the ReplicaSet has the lease record as controller")
	assert.NotContains(t, ours.Labels, manifest.AppLabel, "no user selector on app matches our ReplicaSet")

	// A user's Deployment selecting app: web, with the native controller on.
	stop, err := dt.env.Stack.StartControllerManager(ctx, "isolation-deployment-controller", "deployment-controller", "10262")
	require.NoError(t, err)
	t.Cleanup(func() { _ = stop() })
	one := int32(1)
	theirs := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}},
			},
		},
	}
	_, err = dt.env.Kube.AppsV1().Deployments(ns).Create(ctx, theirs, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		d, err := dt.env.Kube.AppsV1().Deployments(ns).Get(ctx, "theirs", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == 1
	}, 3*time.Minute, 100*time.Millisecond, "the user's Deployment never rolled out")
	time.Sleep(2 * time.Second) // a few more syncs of the native controller
	got, err := dt.env.Kube.AppsV1().ReplicaSets(ns).Get(ctx, ours.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, owned(got.OwnerReferences), "still ours, not adopted")
	for _, r := range got.OwnerReferences {
		assert.NotEqual(t, "Deployment", r.Kind, "adopted by the user's Deployment")
	}
	assert.Equal(t, int32(3), *got.Spec.Replicas, "the native controller did not scale our ReplicaSet")
	assert.Equal(t, ours.Generation, got.Generation, "nobody wrote our ReplicaSet")

	// Deleting the lease record collects the lease's namespace.
	require.NoError(t, dt.env.Dynamic.Resource(crds.Leases).Delete(ctx, dt.lease, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		n, err := dt.env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && n.DeletionTimestamp != nil
	}, 3*time.Minute, 200*time.Millisecond, "the garbage collector never collected the lease's namespace")
}

// Guards 8.3: `kubectl get leases` is coordination.k8s.io's; deployflow's
// kinds answer to a category and short names.
func TestKubectlFindsDeployflowsKindsByCategory(t *testing.T) {
	dt := newDeployTest(t)
	out := dt.kubectl("get", "deployflow")
	assert.Contains(t, out, "lease.deployflow.dev/"+dt.lease)
	assert.Contains(t, dt.kubectl("get", "dflease", dt.lease), dt.lease)
	assert.Contains(t, dt.kubectl("get", "leases.deployflow.dev", dt.lease), dt.lease)
}

// Guards 8.3: a standalone rollout kept every old ReplicaSet.
func TestStandaloneRolloutCleansUpPastRevisionHistoryLimit(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns, tq := env.Namespace(t), env.Worker(t)
	for i, image := range []string{"nginx:1.24", "nginx:1.25", "nginx:1.26", "nginx:1.27"} {
		in := api.RolloutInput{Namespace: ns, Service: "web"}
		one, limit := int32(1), int32(1)
		in.Deployment.Spec.Replicas = &one
		in.Deployment.Spec.RevisionHistoryLimit = &limit
		in.Deployment.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web", Image: image}}
		run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("%s:%d", api.RolloutWorkflowID(ns, "web"), i), TaskQueue: tq,
		}, api.RolloutWorkflow, in)
		require.NoError(t, err)
		require.NoError(t, run.Get(ctx, nil), image)
	}
	rss, err := env.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(rss.Items), 2, "the new ReplicaSet and revisionHistoryLimit (1) old ones")
}

// Guards 8.4: an undo sent to a lease's running rollout made the lease
// record "Succeeded" with the new manifest as last-known-good while the old
// image ran; a scale of the rollout was undone by the next reapply.
func TestTheLeaseRecordsWhatItsRolloutsRan(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	ns := manifest.Namespace(dt.lease)
	dt.deploy(web(dt.lease, "web", "nginx:1.26", 3))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase)

	update := func(name string, arg any) {
		t.Helper()
		opts := client.UpdateWorkflowOptions{WorkflowID: api.RolloutWorkflowID(ns, "web"), UpdateName: name, WaitForStage: client.WorkflowUpdateStageCompleted}
		if arg != nil {
			opts.Args = []any{arg}
		}
		require.Eventually(t, func() bool {
			h, err := dt.env.Temporal.UpdateWorkflow(ctx, opts)
			return err == nil && h.Get(ctx, nil) == nil
		}, 2*time.Minute, 100*time.Millisecond, "update %s never accepted", name)
	}

	// An undo mid-rollout: the lease is not recorded on the new manifest.
	dt.deploy(slow(web(dt.lease, "web", "nginx:1.27", 3), "3s"))
	update(api.UpdateUndo, api.UndoRequest{})
	st := dt.waitRevision(dt.lease, 2)
	assert.Equal(t, api.PhaseFailed, st.Phase)
	assert.Contains(t, st.History[len(st.History)-1].Outcome, api.ErrRolloutUndone)
	_, _, images := dt.available(ns, "web")
	assert.Equal(t, int32(3), images["nginx:1.26"])
	assert.Zero(t, images["nginx:1.27"])
	// What the lease reapplies is its last-known-good manifest: 1.26.
	require.NoError(t, dt.env.Temporal.SignalWorkflow(ctx, api.DeployWorkflowID(dt.lease), "", api.SignalRedeploy,
		api.RedeployRequest{Action: api.RedeployReapply}))
	st = dt.waitRevision(dt.lease, 3)
	assert.Equal(t, activities.ChangeNone, st.Classes["web"], "reapplying the last-known-good manifest changes nothing")

	// A scale of the lease's rollout: the lease now runs 5.
	dt.deploy(slow(web(dt.lease, "web", "nginx:1.28", 3), "2s"))
	update(api.UpdateScale, api.ScaleRequest{Replicas: 5})
	st = dt.waitRevision(dt.lease, 4)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	require.NoError(t, dt.env.Temporal.SignalWorkflow(ctx, api.DeployWorkflowID(dt.lease), "", api.SignalRedeploy,
		api.RedeployRequest{Action: api.RedeployReapply}))
	st = dt.waitRevision(dt.lease, 5)
	assert.Equal(t, activities.ChangeNone, st.Classes["web"], "the reapply keeps the operator's 5 replicas")
	desired, _, _ := dt.available(ns, "web")
	assert.Equal(t, int32(5), desired)
}

// Guards 8.5: a deploy that failed after reserving hostnames and IPs but
// before changing the workload kept them (here: its namespace exists and is
// not deployflow's, which also used to be written into).
func TestAnEarlyFailureReleasesWhatTheDeployTook(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	ns := manifest.Namespace(dt.lease)
	_, err := dt.env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	host := dt.lease + ".apps.example.com"
	dt.deploy(twoServices(dt.lease, host, "nginx:1.27", nil, false))
	st := dt.waitRevision(dt.lease, 1)
	assert.Equal(t, api.PhaseFailed, st.Phase)
	assert.Contains(t, st.LastError, activities.ErrNamespaceNotAllowed)
	held, err := dt.acts.Hostnames.Held(ctx, dt.lease)
	require.NoError(t, err)
	assert.Empty(t, held, "the hostname went back")
	ips, err := dt.acts.IPs.Declared(ctx, dt.lease)
	require.NoError(t, err)
	assert.Empty(t, ips, "the IP went back")
	svcs, err := dt.env.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, svcs.Items, "nothing was written in the foreign namespace")
}

// Guards 8.5: "did the apply change anything" came from resourceVersion, so
// a retried apply (after a lost response) answered "no".
func TestARetriedApplyReportsWhatTheFirstDid(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	m := web(dt.lease, "web", "nginx:1.27", 1, dt.lease+".apps.example.com")
	require.NoError(t, dt.acts.EnsureNamespace(ctx, activities.EnsureNamespaceInput{
		Name: manifest.Namespace(dt.lease), Labels: map[string]string{manifest.LeaseLabel: dt.lease},
	}))
	objs, err := activities.RenderObjects(&m, nil, nil)
	require.NoError(t, err)
	objs.DeployID = "1"
	first, err := dt.acts.ApplyObjects(ctx, objs)
	require.NoError(t, err)
	assert.Equal(t, []string{"Ingress/" + manifest.IngressName, "Service/web"}, first.Changed)
	retry, err := dt.acts.ApplyObjects(ctx, objs)
	require.NoError(t, err)
	assert.Equal(t, first.Changed, retry.Changed, "a retry of the same deploy answers the same")
	objs.DeployID = "2"
	next, err := dt.acts.ApplyObjects(ctx, objs)
	require.NoError(t, err)
	assert.Empty(t, next.Changed, "the next deploy of the same objects changes nothing")
	objs.DryRun, objs.DeployID = true, ""
	plan, err := dt.acts.ApplyObjects(ctx, objs)
	require.NoError(t, err)
	assert.Empty(t, plan.Changed, "nor would a plan")
}

// Issue 8.6: a teardown (signal or update) sent the moment a deploy
// finishes, as the lease's workflow continues as new, is never lost. The
// window the fix closes (a signal delivered in the very workflow task that
// continues as new, before its receiving goroutine runs) is narrow: this
// test lost none of 8 on the code before the fix (e104f28), so it does not
// fail there; the drain before continue-as-new (deployRun.continueAsNew)
// closes the window by construction, and this test keeps teardowns at the
// end of a deploy from regressing.
func TestTeardownAsTheDeployFinishesIsNeverLost(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	for i := 0; i < 8; i++ {
		lease := fmt.Sprintf("%s-%d", dt.lease, i)
		dt.createLease(lease, "acme")
		dt.deploy(web(lease, "web", "nginx:1.27", 1))
		// Wait for the rollout to end, then send the teardown at once:
		// it lands in the lease workflow's last tasks before continue-as-new.
		// (Once the rollout exists, its end is waited for with a long poll
		// of its history, which answers as it ends, not by asking again
		// and again.)
		rollout := api.RolloutWorkflowID(manifest.Namespace(lease), "web")
		testenv.Eventually(t, 3*time.Minute, pollQuery, "the rollout of "+lease+" never started", func() (bool, string) {
			_, err := dt.env.Temporal.DescribeWorkflowExecution(ctx, rollout, "")
			return err == nil, fmt.Sprint(err)
		})
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		require.NoError(t, dt.env.Temporal.GetWorkflow(wctx, rollout, "").Get(wctx, nil), "the rollout of %s", lease)
		cancel()
		if i%2 == 0 {
			require.NoError(t, dt.env.Temporal.SignalWorkflow(ctx, api.DeployWorkflowID(lease), "", api.SignalTeardown, nil))
		} else {
			require.NoError(t, dt.env.Update(ctx, client.UpdateWorkflowOptions{
				WorkflowID: api.DeployWorkflowID(lease), UpdateName: api.UpdateTeardown, WaitForStage: client.WorkflowUpdateStageCompleted}, nil))
		}
		// The teardown deletes the lease's namespace: seconds, or tens of
		// seconds with the rest of the suite beside it. A lost one would
		// leave the lease's workflow waiting for an hour.
		require.Eventually(t, func() bool {
			d, err := dt.env.Temporal.DescribeWorkflowExecution(ctx, api.DeployWorkflowID(lease), "")
			return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
		}, 3*time.Minute, pollQuery, "lease %s: the teardown was lost", lease)
		_, err := dt.env.Kube.CoreV1().Namespaces().Get(ctx, manifest.Namespace(lease), metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "lease %s is torn down", lease)
	}
}

// Guards 8.7: `deploy --plan --yes` approved whatever plan the workflow
// computed, not the one printed. A deploy that names the plan it was
// approved with acts only on that plan.
func TestADeployApprovedWithAPlanActsOnlyOnThatPlan(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	m := web(dt.lease, "web", "nginx:1.27", 1)
	h, err := dt.env.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: dt.env.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: api.DeployWorkflowID(dt.lease), TaskQueue: dt.tq, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, api.DeployWorkflow, api.DeployInput{Manifest: m}),
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID: api.DeployWorkflowID(dt.lease), UpdateName: api.UpdateDeploy, WaitForStage: client.WorkflowUpdateStageCompleted,
			Args: []any{api.DeployRequest{Manifest: m, PlanFingerprint: "0123456789abcdef"}},
		},
	})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	t.Cleanup(func() {
		_ = dt.env.Temporal.TerminateWorkflow(ctx, api.DeployWorkflowID(dt.lease), "", "test over")
	})
	st := dt.waitRevision(dt.lease, 1)
	assert.Contains(t, st.History[0].Outcome, "Aborted: the cluster changed since the plan was approved")
	_, err = dt.env.Kube.CoreV1().Namespaces().Get(ctx, manifest.Namespace(dt.lease), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing was deployed")

	// The plan a worker computes is the one the deploy runs.
	run, err := dt.env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: api.PlanWorkflowID(m), TaskQueue: dt.tq},
		api.PlanWorkflow, api.PlanRequest{Manifest: m})
	require.NoError(t, err)
	var plan activities.DeployPlan
	require.NoError(t, run.Get(ctx, &plan))
	require.NoError(t, dt.env.Update(ctx, client.UpdateWorkflowOptions{
		WorkflowID: api.DeployWorkflowID(dt.lease), UpdateName: api.UpdateDeploy, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{api.DeployRequest{Manifest: m, PlanFingerprint: plan.Fingerprint}},
	}, nil))
	st = dt.waitRevision(dt.lease, 2)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, plan.Operations, st.History[len(st.History)-1].Operations)
}

// Guards 8.10: deploy-<lease> for a lease that does not exist recorded
// Failed and then stayed Running, waking every 30 s, forever.
func TestADeployOfAnUnknownLeaseEnds(t *testing.T) {
	dt := newDeployTest(t)
	unknown := dt.lease + "-nobody"
	run := dt.deploy(web(unknown, "web", "nginx:1.27", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := run.Get(ctx, nil)
	require.Error(t, err)
	assert.Equal(t, api.ErrLeaseNotActive, failureType(t, err))
}
