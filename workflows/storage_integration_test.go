package workflows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 39.1, on the local stack: a service's ephemeral volume runs as an
// emptyDir of its size, mounted where the manifest says, its size added to
// the container's ephemeral storage (the kubelet counts it against the
// pod). A persistent volume is refused before anything is written, naming
// the field and what to do instead: of a class the provider does not
// offer, and, on a service that runs as ReplicaSets, of one it does (a
// service does not change kind in place); the running version stays.
// Before, a manifest could describe no disk.
func TestAnEphemeralVolumeRunsAndAPersistentOneIsRefusedWhereItCannotRun(t *testing.T) {
	dt := newDeployTestWith(t, func(a *activities.Activities) {
		a.Limits.StorageClasses, a.Limits.Storage = []string{devstack.StorageClass}, "10Gi"
	})
	ns := manifest.Namespace(dt.lease)
	two := int32(2)
	app := func(vols ...manifest.Volume) manifest.Manifest {
		return manifest.Manifest{Lease: dt.lease, Services: []manifest.Service{
			{Name: "web", Image: "nginx:1.27", Replicas: &two, Ports: []manifest.Port{{Port: 80}},
				Resources: &manifest.Resources{EphemeralStorage: "256Mi"}, Volumes: vols},
		}}
	}
	cache := manifest.Volume{Name: "cache", Size: "1Gi", MountPath: "/var/cache/nginx"}

	dt.deploy(app(cache))
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	pods, err := dt.env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		var dir *corev1.EmptyDirVolumeSource
		for _, v := range p.Spec.Volumes {
			if v.Name == "cache" {
				dir = v.EmptyDir
			}
		}
		require.NotNil(t, dir, "pod %s has the cache volume, an emptyDir", p.Name)
		assert.Equal(t, "1Gi", dir.SizeLimit.String(), "pod %s: the volume's size", p.Name)
		assert.Contains(t, p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "cache", MountPath: "/var/cache/nginx"})
		limit := p.Spec.Containers[0].Resources.Limits[corev1.ResourceEphemeralStorage]
		assert.Equal(t, "1280Mi", limit.String(), "pod %s: 256Mi for logs and layers, and the volume's 1Gi", p.Name)
	}

	// Refused on the running lease: the running version stays.
	data := manifest.Volume{Name: "data", Size: "1Gi", MountPath: "/data", Persistent: true, Class: "gold"}
	withDB := app(cache)
	withDB.Services = append(withDB.Services, manifest.Service{Name: "db", Image: "postgres:16", Replicas: &two,
		Ports: []manifest.Port{{Port: 5432}}, Volumes: []manifest.Volume{data}})
	why := dt.refusal(withDB)
	assert.Contains(t, why, `services[1].volumes[0].class: "gold" is not one of this provider's storage classes (the operator's --storage-classes): use one of `+devstack.StorageClass)
	after, err := dt.env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	require.NoError(t, err)
	require.Len(t, after.Items, 2, "the running version stays")
	for _, p := range after.Items {
		assert.Contains(t, []string{pods.Items[0].Name, pods.Items[1].Name}, p.Name, "the refused deploy replaced no pod")
	}

	// Of a class it offers, on web, which runs as ReplicaSets: refused,
	// the running version stays.
	data.Class = devstack.StorageClass
	why = dt.refusal(app(cache, data))
	assert.Contains(t, why, "services[0].volumes: web runs as ReplicaSets, and this manifest gives it a persistent volume: a service does not change kind in place")

	// Refused on a new lease before anything is written.
	big := manifest.Volume{Name: "scratch", Size: "5Gi", MountPath: "/scratch"} // 1Gi and 5Gi on each of two replicas
	lease := testenv.ShortName("disk")
	dt.createLease(lease, "acme")
	m := app(cache, big)
	m.Lease = lease
	assert.Contains(t, dt.refusal(m), "services[0].volumes[1].size: the lease's volumes take 12Gi in all (each volume times its service's replicas): this provider allows at most 10Gi per lease (the operator's --max-storage)")
	_, err = dt.env.Kube.CoreV1().Namespaces().Get(context.Background(), manifest.Namespace(lease), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing was written: lease %s's namespace does not exist", lease)
}

// Issue 39 through a lease's workflow, on the stack's StatefulSet
// controller and its storage class: a two-replica stateful service deploys
// as a StatefulSet with its headless Service and two bound claims; an image
// update rolls it out (db-1, then db-0) with every claim the one it was; a
// scale to 3 and back keeps every claim (db-2's retained); a restart
// replaces every pod on a new revision, each with its claim; a canary at one pod whose analysis fails returns it, with its claim; a
// manifest that would drop its volumes is refused, the service running on;
// the lease's teardown deletes the claims with its namespace.
func TestAStatefulServiceDeploysRollsOutAndItsTeardownDeletesItsClaims(t *testing.T) {
	dt := newDeployTestWith(t, func(a *activities.Activities) {
		a.Limits.StorageClasses, a.Limits.Storage = []string{devstack.StorageClass}, "10Gi"
	})
	ctx := context.Background()
	ns := manifest.Namespace(dt.lease)
	ref := activities.StatefulSetRef{Namespace: ns, Name: "db"}
	two := int32(2)
	db := func(image string, vols ...manifest.Volume) manifest.Manifest {
		return manifest.Manifest{Lease: dt.lease, Services: []manifest.Service{
			{Name: "db", Image: image, Replicas: &two, Ports: []manifest.Port{{Port: 5432}}, Volumes: vols},
		}}
	}
	data := manifest.Volume{Name: "data", Size: "1Gi", MountPath: "/var/lib/postgresql/data", Persistent: true, Class: devstack.StorageClass}
	read := func() *activities.StatefulSetState {
		st, err := dt.acts.ReadStatefulSet(ctx, ref)
		require.NoError(t, err)
		return st
	}

	dt.deploy(db("postgres:16", data))
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, "rollout", st.Classes["db"])
	var claims map[string]string
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the claims were never both Bound", func() (bool, string) {
		claims = read().Claims
		return len(claims) == 2 && claims["data-db-0"] != "" && claims["data-db-1"] != "", fmt.Sprint(claims)
	})
	hs, err := dt.env.Kube.CoreV1().Services(ns).Get(ctx, manifest.HeadlessService("db"), metav1.GetOptions{})
	require.NoError(t, err, "the headless Service the pods' names resolve in")
	assert.Equal(t, corev1.ClusterIPNone, hs.Spec.ClusterIP)
	rss, err := dt.env.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, rss.Items, "a stateful service runs no ReplicaSet")
	v1 := read().UpdateRevision

	dt.deploy(db("postgres:17", data))
	st = dt.waitRevision(dt.lease, 2)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, "rollout", st.Classes["db"])
	sts := read()
	v2 := sts.UpdateRevision
	assert.NotEqual(t, v1, sts.UpdateRevision)
	assert.Equal(t, int32(0), sts.Partition)
	for _, p := range sts.Pods {
		assert.Equal(t, sts.UpdateRevision, p.Revision, "db-%d runs the new revision", p.Ordinal)
		assert.True(t, p.Ready, "db-%d is Ready", p.Ordinal)
	}
	assert.Equal(t, claims, sts.Claims, "every claim is the one it was, bound to the same volume")

	// Scaled to 3, as a ReplicaSet's service is: db-2 comes with its own
	// claim, the others keep theirs; then back to 2, the claim retained.
	leaseUpdate := func(name string, args ...any) {
		t.Helper()
		require.NoError(t, dt.env.Update(ctx, client.UpdateWorkflowOptions{WorkflowID: api.DeployWorkflowID(dt.lease),
			UpdateName: name, Args: args, WaitForStage: client.WorkflowUpdateStageCompleted}, nil))
	}
	leaseUpdate(api.UpdateScale, api.ScaleServiceRequest{Service: "db", Replicas: 3})
	st = dt.waitRevision(dt.lease, 3)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, "scale-only", st.Classes["db"])
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "db-2's claim was never Bound", func() (bool, string) {
		c := read().Claims
		return len(c) == 3 && c["data-db-2"] != "", fmt.Sprint(c)
	})
	for name, volume := range claims {
		assert.Equal(t, volume, read().Claims[name], "%s keeps its volume", name)
	}
	claims = read().Claims
	leaseUpdate(api.UpdateScale, api.ScaleServiceRequest{Service: "db", Replicas: 2})
	st = dt.waitRevision(dt.lease, 4)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	assert.Equal(t, claims, read().Claims, "scaled down, db-2's claim is retained")

	// A restart replaces every pod on a new revision, each with its claim.
	leaseUpdate(api.UpdateRestart)
	st = dt.waitRevision(dt.lease, 5)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	sts = read()
	assert.NotEqual(t, v2, sts.UpdateRevision, "a restart is a new revision")
	for _, p := range sts.Pods {
		assert.Equal(t, sts.UpdateRevision, p.Revision, "db-%d restarted", p.Ordinal)
	}
	assert.Equal(t, claims, sts.Claims, "every claim is the one it was")
	v2 = sts.UpdateRevision

	// A canary at one pod whose analysis fails (its Job exits 3): the
	// deploy fails, db-1 returns to the running revision with its claim.
	fifty := int32(50)
	canary := db("postgres:18", data)
	canary.Services[0].Rollout = &manifest.Rollout{Strategy: manifest.StrategyCanary, Steps: []manifest.CanaryStep{{SetWeight: &fifty},
		{Analysis: &manifest.Analysis{Job: &manifest.JobCheck{Image: "ghcr.io/acme/smoke:1",
			PodAnnotations: map[string]string{"deployflow.dev/exit-code": "3"}}}}}} // the local stack's pods exit with it
	dt.deploy(canary)
	st = dt.waitRevision(dt.lease, 6)
	assert.Equal(t, api.PhaseFailed, st.Phase)
	assert.Contains(t, st.LastError, "analysis failed", "the deploy says why")
	sts = read()
	assert.Equal(t, v2, sts.UpdateRevision, "the last-known-good revision is the StatefulSet's again")
	for _, p := range sts.Pods {
		assert.Equal(t, v2, p.Revision, "db-%d runs the last-known-good revision", p.Ordinal)
		assert.True(t, p.Ready, "db-%d is Ready", p.Ordinal)
	}
	assert.Equal(t, claims, sts.Claims, "the canary's pod came back with its claim")

	// Its volumes dropped: refused, the service runs on.
	why := dt.refusal(db("postgres:17"))
	assert.Contains(t, why, "services[0].volumes: db runs as a StatefulSet with persistent volumes, and this manifest has none")
	assert.Equal(t, claims, read().Claims)

	// The teardown deletes the claims with the namespace.
	require.NoError(t, dt.env.Update(ctx, client.UpdateWorkflowOptions{
		WorkflowID: api.DeployWorkflowID(dt.lease), UpdateName: api.UpdateTeardown, WaitForStage: client.WorkflowUpdateStageCompleted}, nil))
	testenv.Eventually(t, 3*time.Minute, 500*time.Millisecond, "the namespace and its claims were never deleted", func() (bool, string) {
		pvcs, err := dt.env.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		_, nsErr := dt.env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err == nil && len(pvcs.Items) == 0 && apierrors.IsNotFound(nsErr), fmt.Sprintf("%d claims, namespace: %v", len(pvcs.Items), nsErr)
	})
}
