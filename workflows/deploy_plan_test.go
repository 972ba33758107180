package workflows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/worker/testenv"
)

func (dt *deployTest) plan(m manifest.Manifest) *activities.DeployPlan {
	dt.t.Helper()
	// As PlanWorkflow passes it: taken as the lease takes it (hardened),
	// with its defaults, filled once.
	p, err := dt.acts.PlanDeploy(context.Background(), activities.PlanInput{Manifest: *m.Hardened().WithDefaults(), Owner: dt.owner})
	require.NoError(dt.t, err)
	return p
}

// `deploy --plan` (PlanDeploy, the code the CLI runs) lists the operations
// the deploy then executes, in order: a first deploy, then an update that
// changes an image, swaps a hostname and drops an IP endpoint.
func TestPlanListsTheOperationsTheDeployExecutes(t *testing.T) {
	dt := newDeployTest(t)
	hostA, hostB := dt.lease+".a.example.com", dt.lease+".b.example.com"
	v1 := twoServices(dt.lease, hostA, "nginx:1.26", nil, false)
	p1 := dt.plan(v1)
	assert.Equal(t, []string{
		plan.AllocateIP("public").Text,
		plan.ReserveHostname(hostA).Text,
		plan.ApplyObject("Ingress/lease-ingress").Text,
		plan.ApplyObject("Service/api").Text,
		plan.ApplyObject("Service/api-ip-public").Text,
		plan.ApplyObject("Service/web").Text,
		"roll out web: nginx:1.26, 3 replicas",
		"roll out api: ghcr.io/acme/api:1.0, 3 replicas",
	}, p1.Operations)
	dt.deploy(v1)
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, p1.Operations, st.History[0].Operations, "the first deploy did what its plan said")
	assert.Equal(t, treeShape(p1.Tree), treeShape(st.History[0].Tree), "the first deploy executed the tree its plan printed")

	v2 := twoServices(dt.lease, hostB, "nginx:1.27", nil, false)
	v2.Services[1].Ports[0].Expose = nil // api drops its IP endpoint
	p2 := dt.plan(v2)
	assert.Contains(t, p2.Operations, plan.ReserveHostname(hostB).Text)
	assert.Contains(t, p2.Operations, plan.ReleaseHostname(hostA).Text)
	assert.Contains(t, p2.Operations, plan.ReleaseIP("public").Text)
	assert.Contains(t, p2.Operations, plan.DeleteObject("Service/api-ip-public").Text)
	assert.Contains(t, p2.Operations, "roll out web: nginx:1.26 → nginx:1.27, 3 → 3 replicas")
	assert.Contains(t, p2.Summary, "2 services")
	dt.deploy(v2)
	st = dt.waitRevision(dt.lease, 2)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, p2.Operations, st.History[1].Operations, "the update did what its plan said")
	assert.Equal(t, treeShape(p2.Tree), treeShape(st.History[1].Tree), "the update executed the tree its plan printed")

	assert.Empty(t, dt.plan(v2).Operations, "nothing left to do once deployed")
}

// A manifest with requireApproval stops at its plan; unapproved, it times
// out into an abort with nothing changed.
func TestUnapprovedDeployTimesOutIntoAnAbortWithNothingChanged(t *testing.T) {
	dt := newDeployTest(t)
	// A window of 20s to see the deploy await approval in: with 2s, a
	// status query that the loaded server answered later than that saw
	// the abort instead (CI run 93).
	dt.approvalTimeout = 20
	m := twoServices(dt.lease, dt.lease+".apps.example.com", "nginx:1.26", nil, false)
	m.RequireApproval = true
	dt.deploy(m)

	var st api.DeployStatus
	testenv.Eventually(t, time.Minute, pollQuery, "never awaited approval", func() (bool, string) {
		s, err := dt.status(dt.lease)
		if err != nil {
			return false, err.Error()
		}
		st = s
		return s.Phase == api.PhaseAwaitingApproval, fmt.Sprintf("phase %s", s.Phase)
	})
	require.NotNil(t, st.Plan)
	assert.NotEmpty(t, st.Plan.Operations, "the plan awaiting approval is in the status")

	st = dt.waitRevision(dt.lease, 1)
	assert.Equal(t, api.PhaseAborted, st.Phase)
	assert.Contains(t, st.History[0].Outcome, "Aborted: not approved in time")
	assert.Empty(t, st.History[0].Operations, "nothing was done")
	_, err := dt.env.Kube.CoreV1().Namespaces().Get(context.Background(), manifest.Namespace(dt.lease), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no namespace")
	held, err := dt.acts.Hostnames.Held(context.Background(), dt.lease)
	require.NoError(t, err)
	assert.Empty(t, held, "no hostname reserved")
	ips, err := dt.acts.IPs.Declared(context.Background(), dt.lease)
	require.NoError(t, err)
	assert.Empty(t, ips, "no IP reserved")
}

// Approving the plan deploys it; a plan the cluster has moved past is
// refused at approval.
func TestApprovedPlanDeploysAndAStalePlanIsRefused(t *testing.T) {
	dt := newDeployTest(t)
	host := dt.lease + ".apps.example.com"
	m := twoServices(dt.lease, host, "nginx:1.26", nil, false)
	m.RequireApproval = true
	awaiting := func() api.DeployStatus {
		var st api.DeployStatus
		require.Eventually(t, func() bool {
			s, err := dt.status(dt.lease)
			st = s
			return err == nil && s.Phase == api.PhaseAwaitingApproval && s.Plan != nil
		}, 2*time.Minute, 100*time.Millisecond, "never awaited approval (last %+v)", st)
		return st
	}
	approve := func(fp string) error {
		h, err := dt.env.Temporal.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{
			WorkflowID: api.DeployWorkflowID(dt.lease), UpdateName: api.UpdateApprove,
			Args: []any{api.ApproveRequest{Fingerprint: fp}}, WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err != nil {
			return err
		}
		return h.Get(context.Background(), nil)
	}

	dt.deploy(m)
	st := awaiting()
	assert.Error(t, approve("not-the-plan"), "approving another plan is refused")
	require.NoError(t, approve(st.Plan.Fingerprint))
	st = dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, st.Plan.Operations, st.History[0].Operations)

	// A new plan awaits approval; meanwhile someone scales web by hand.
	m.Services[0].Image = "nginx:1.27"
	dt.deploy(m)
	awaiting()
	list, err := dt.env.Kube.AppsV1().ReplicaSets(manifest.Namespace(dt.lease)).List(context.Background(), metav1.ListOptions{LabelSelector: "deployflow.dev/service=web"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	rs := list.Items[0]
	five := int32(5)
	rs.Spec.Replicas = &five
	_, err = dt.env.Kube.AppsV1().ReplicaSets(rs.Namespace).Update(context.Background(), &rs, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, approve(""))
	st = dt.waitRevision(dt.lease, 2)
	assert.Contains(t, st.History[1].Outcome, "Aborted: the cluster changed since the plan was approved")
	_, _, images := dt.available(manifest.Namespace(dt.lease), "web")
	assert.Zero(t, images["nginx:1.27"], "the stale plan changed nothing")
}

// treeShape is a tree as `deploy --plan` prints it: each node's depth,
// operation, target and words, in order.
func treeShape(t *plan.Node) []string {
	var out []string
	if t == nil {
		return nil
	}
	t.Walk(func(n *plan.Node, depth int) {
		out = append(out, fmt.Sprintf("%d %s %s %q", depth, n.Op, n.Target, n.Text))
	})
	return out
}
