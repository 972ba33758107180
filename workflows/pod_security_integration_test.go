package workflows_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Issue 35.4 on the real stack, under `--pod-security restricted`: the lease
// namespaces enforce Pod Security's restricted level, which the API server
// checks on every pod the ReplicaSet controller creates. Before, every
// deployflow pod was refused there (no security context at all). Now a
// manifest whose container can run as non-root deploys, its pods hardened
// and admitted; one whose container may run as root is refused before
// anything is written, naming the field and the fix.
func TestUnderARestrictedPodSecurityLevelANonRootManifestDeploysAndARootOneIsRefused(t *testing.T) {
	dt := newDeployTestWith(t, func(a *activities.Activities) {
		a.Namespace.PodSecurity = manifest.PodSecurityRestricted
		a.Limits.PodSecurity = manifest.PodSecurityRestricted
	})
	uid := int64(10001)
	nonRoot := slow(web(dt.lease, "web", "nginx:1.27", 2), "1s")
	nonRoot.Services[0].Security = &manifest.Security{RunAsNonRoot: true, RunAsUser: &uid}
	dt.deploy(nonRoot)
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)

	ctx := context.Background()
	ns, err := dt.env.Kube.CoreV1().Namespaces().Get(ctx, manifest.Namespace(dt.lease), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"], "the API server admits each pod at the restricted level")
	// The API server enforces it: a pod as the templates were before
	// (no security context) is refused in this namespace.
	_, err = dt.env.Kube.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "unhardened"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.Error(t, err, "an unhardened pod is refused at the restricted level")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), "violates PodSecurity \"restricted:")
	pods, err := dt.env.Kube.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2, "both pods were admitted")
	for _, p := range pods.Items {
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, p.Spec.SecurityContext.SeccompProfile.Type, p.Name)
		assert.True(t, *p.Spec.SecurityContext.RunAsNonRoot, p.Name)
		assert.Equal(t, uid, *p.Spec.SecurityContext.RunAsUser, p.Name)
		c := p.Spec.Containers[0].SecurityContext
		assert.False(t, *c.AllowPrivilegeEscalation, p.Name)
		assert.Equal(t, []corev1.Capability{"ALL"}, c.Capabilities.Drop, p.Name)
	}

	// A manifest that says nothing of its user may run as root: refused
	// before the lease's namespace exists.
	other := dt.lease + "-r"
	dt.createLease(other, dt.owner)
	dt.deploy(web(other, "web", "nginx:1.27", 2))
	st = dt.waitRevision(other, 1)
	assert.Equal(t, api.PhaseFailed, st.Phase)
	assert.Contains(t, st.LastError, "services[0].security.runAsNonRoot: this provider runs pods at the restricted Pod Security level")
	assert.Contains(t, st.LastError, "set runAsNonRoot: true")
	_, err = dt.env.Kube.CoreV1().Namespaces().Get(ctx, manifest.Namespace(other), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing was written: no namespace for the refused lease (%v)", err)
}

// Issue 35.5 on the real stack: where the cluster's load balancer reaches
// pods directly (--lease-loadbalancers-without-nodeports), a declared IP
// endpoint takes none of the cluster's NodePorts: a lease whose NodePort
// quota is 0 deploys one, and its LoadBalancer Service has no NodePort.
// By default (allocated) the same lease is refused before any write.
func TestLoadBalancersWithoutNodePortsTakeNoneOfTheClustersRange(t *testing.T) {
	dt := newDeployTestWith(t, func(a *activities.Activities) {
		a.Namespace.QuotaNodePorts = "0"
		a.Namespace.LoadBalancersWithoutNodePorts = true
		a.Limits.NodePorts = manifest.UnboundedNodePorts
	})
	dt.deploy(twoServices(dt.lease, dt.lease+".apps.example.com", "nginx:1.26", nil, false))
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	lb, err := dt.env.Kube.CoreV1().Services(manifest.Namespace(dt.lease)).Get(context.Background(), "api-ip-public", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, lb.Spec.AllocateLoadBalancerNodePorts)
	assert.False(t, *lb.Spec.AllocateLoadBalancerNodePorts)
	for _, p := range lb.Spec.Ports {
		assert.Zero(t, p.NodePort, "port %d took no NodePort", p.Port)
	}

	refused := newDeployTestWith(t, func(a *activities.Activities) {
		a.Namespace.QuotaNodePorts = "0"
		a.Limits.NodePorts = manifest.NoNodePorts
	})
	refused.deploy(twoServices(refused.lease, refused.lease+".apps.example.com", "nginx:1.26", nil, false))
	st = refused.waitRevision(refused.lease, 1)
	assert.Equal(t, api.PhaseFailed, st.Phase)
	assert.Contains(t, st.LastError, "expose.ip: 1 ports exposed on IP endpoints (each takes a NodePort of the cluster's shared range): this provider allows at most 0 per lease")
}
