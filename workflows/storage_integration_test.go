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
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 39.1, on the local stack: a service's ephemeral volume runs as an
// emptyDir of its size, mounted where the manifest says, its size added to
// the container's ephemeral storage (the kubelet counts it against the
// pod). A persistent volume is refused before anything is written, naming
// the field and what to use instead: of a class the provider does not
// offer, and, until StatefulSets roll out (issue 39.2), of one it does;
// the running version stays. Before, a manifest could describe no disk.
func TestAnEphemeralVolumeRunsAndAPersistentOneIsRefusedUntilStatefulSetsRollOut(t *testing.T) {
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
	why := dt.refusal(app(cache, data))
	assert.Contains(t, why, `services[0].volumes[1].class: "gold" is not one of this provider's storage classes (the operator's --storage-classes): use one of `+devstack.StorageClass)
	after, err := dt.env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	require.NoError(t, err)
	require.Len(t, after.Items, 2, "the running version stays")
	for _, p := range after.Items {
		assert.Contains(t, []string{pods.Items[0].Name, pods.Items[1].Name}, p.Name, "the refused deploy replaced no pod")
	}

	// Refused on new leases, each before anything is written.
	data.Class = devstack.StorageClass
	big := manifest.Volume{Name: "scratch", Size: "5Gi", MountPath: "/scratch"} // 1Gi and 5Gi on each of two replicas
	for _, c := range []struct {
		vols []manifest.Volume
		want string
	}{
		{[]manifest.Volume{cache, data}, "services[0].volumes[1].persistent: this version of deployflow does not yet run services with persistent volumes (StatefulSet rollouts, issue 39.2): use an ephemeral volume"},
		{[]manifest.Volume{cache, big}, "services[0].volumes[1].size: the lease's volumes take 12Gi in all (each volume times its service's replicas): this provider allows at most 10Gi per lease (the operator's --max-storage)"},
	} {
		lease := testenv.ShortName("disk")
		dt.createLease(lease, "acme")
		m := app(c.vols...)
		m.Lease = lease
		assert.Contains(t, dt.refusal(m), c.want)
		_, err := dt.env.Kube.CoreV1().Namespaces().Get(context.Background(), manifest.Namespace(lease), metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "nothing was written: lease %s's namespace does not exist", lease)
	}
}
