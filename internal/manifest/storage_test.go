package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kptr "k8s.io/utils/ptr"
)

func storageManifest(replicas int32, vols ...Volume) *Manifest {
	return &Manifest{Lease: "shop", Services: []Service{{Name: "db", Image: "postgres:16", Replicas: &replicas,
		Ports: []Port{{Port: 5432}}, Volumes: vols, Resources: &Resources{EphemeralStorage: "256Mi"}}}}
}

var (
	dataVolume  = Volume{Name: "data", Size: "10Gi", MountPath: "/var/lib/postgresql/data", Persistent: true, Class: "local"}
	cacheVolume = Volume{Name: "cache", Size: "1Gi", MountPath: "/cache"}
)

// Issue 39.1: an ephemeral volume is an emptyDir of at most its size,
// mounted where the manifest says; the service stays ReplicaSets.
func TestAnEphemeralVolumeIsAnEmptyDirOfItsSize(t *testing.T) {
	m := storageManifest(2, cacheVolume)
	require.NoError(t, m.Validate())
	assert.False(t, m.Services[0].Stateful())
	d, err := m.WithDefaults().Deployment("db")
	require.NoError(t, err)
	pod := d.Spec.Template.Spec
	size := resource.MustParse("1Gi")
	assert.Equal(t, []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}}}, pod.Volumes)
	assert.Equal(t, []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}, pod.Containers[0].VolumeMounts)
	// The container's ephemeral storage holds the volume: the kubelet
	// counts an emptyDir against its pod's limit.
	r := pod.Containers[0].Resources
	assert.Equal(t, "1280Mi", kptr.To(r.Limits[corev1.ResourceEphemeralStorage]).String(), "256Mi and the volume's 1Gi")
	assert.Equal(t, "1280Mi", kptr.To(r.Requests[corev1.ResourceEphemeralStorage]).String())
	// Beside what the manifest gives for logs and the writable layer.
	withDisk := storageManifest(2, cacheVolume, Volume{Name: "tmp", Size: "512Mi", MountPath: "/tmp"})
	withDisk.Services[0].Resources = &Resources{CPU: "1", EphemeralStorage: "500Mi"}
	d, err = withDisk.WithDefaults().Deployment("db")
	require.NoError(t, err)
	r = d.Spec.Template.Spec.Containers[0].Resources
	assert.Equal(t, "2036Mi", kptr.To(r.Limits[corev1.ResourceEphemeralStorage]).String(), "500Mi + 1Gi + 512Mi")
	assert.Equal(t, "1", kptr.To(r.Limits[corev1.ResourceCPU]).String())
	_, err = m.WithDefaults().StatefulSet("db")
	require.ErrorContains(t, err, "has no persistent volume: it runs as ReplicaSets")

	// A service without volumes renders as before (its pod-template hash,
	// hence its ReplicaSets, unchanged).
	plain, err := storageManifest(2).WithDefaults().Deployment("db")
	require.NoError(t, err)
	assert.Nil(t, plain.Spec.Template.Spec.Volumes)
	assert.Nil(t, plain.Spec.Template.Spec.Containers[0].VolumeMounts)
	assert.Equal(t, "256Mi", kptr.To(plain.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceEphemeralStorage]).String())

	// Without resources.ephemeralStorage, the container's limit would be
	// the volume's alone, nothing left for its logs and writable layer
	// (review): refused, naming the field.
	bare := storageManifest(2, cacheVolume)
	bare.Services[0].Resources = &Resources{CPU: "1"}
	var v *ValidationError
	require.ErrorAs(t, bare.Validate(), &v)
	require.Len(t, v.Problems, 1)
	assert.Equal(t, "services[0].resources.ephemeralStorage", v.Problems[0].Path)
	assert.Contains(t, v.Problems[0].Message, "is required with an ephemeral volume")
	bare.Services[0].Volumes = []Volume{dataVolume}
	require.NoError(t, bare.Validate(), "a persistent volume alone needs none")

	// ".." is refused as a path segment, not inside a name.
	dots := storageManifest(1, Volume{Name: "old", Size: "1Gi", MountPath: "/data..old"})
	require.NoError(t, dots.Validate())
}

// A persistent volume makes the service a StatefulSet: a claim template of
// the volume's class and size per persistent volume, the pod template of
// its Deployment with the claim mounted, pods named through its headless
// Service, the partition at its replicas (deployflow lowers it step by
// step), and its claims retained when it is scaled down or deleted.
func TestAPersistentVolumeMakesTheServiceAStatefulSet(t *testing.T) {
	ro := dataVolume
	ro.Name, ro.MountPath, ro.ReadOnly = "seed", "/seed", true
	m := storageManifest(3, dataVolume, cacheVolume, ro)
	require.NoError(t, m.Validate())
	assert.True(t, m.Services[0].Stateful())
	assert.Equal(t, []string{"db"}, m.StatefulServices())
	st, err := m.WithDefaults().StatefulSet("db")
	require.NoError(t, err)
	d, err := m.WithDefaults().Deployment("db")
	require.NoError(t, err)

	assert.Equal(t, "db", st.Name)
	assert.Equal(t, "lease-shop", st.Namespace)
	assert.Equal(t, int32(3), *st.Spec.Replicas)
	assert.Equal(t, d.Spec.Template, st.Spec.Template, "the same pod template as the service's Deployment")
	assert.Equal(t, "db-pods", st.Spec.ServiceName)
	assert.Equal(t, appsv1.OrderedReadyPodManagement, st.Spec.PodManagementPolicy)
	assert.Equal(t, appsv1.RollingUpdateStatefulSetStrategyType, st.Spec.UpdateStrategy.Type)
	assert.Equal(t, int32(3), *st.Spec.UpdateStrategy.RollingUpdate.Partition, "no pod replaced until deployflow lowers the partition")
	assert.Equal(t, &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	}, st.Spec.PersistentVolumeClaimRetentionPolicy)

	require.Len(t, st.Spec.VolumeClaimTemplates, 2, "one per persistent volume")
	claim := st.Spec.VolumeClaimTemplates[0]
	assert.Equal(t, "data", claim.Name)
	assert.Equal(t, "local", *claim.Spec.StorageClassName)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, claim.Spec.AccessModes)
	assert.Equal(t, resource.MustParse("10Gi"), claim.Spec.Resources.Requests[corev1.ResourceStorage])
	assert.Equal(t, "seed", st.Spec.VolumeClaimTemplates[1].Name)

	pod := st.Spec.Template.Spec
	assert.Equal(t, []corev1.VolumeMount{
		{Name: "data", MountPath: "/var/lib/postgresql/data"},
		{Name: "cache", MountPath: "/cache"},
		{Name: "seed", MountPath: "/seed", ReadOnly: true},
	}, pod.Containers[0].VolumeMounts)
	require.Len(t, pod.Volumes, 1, "only the ephemeral volume is the pod's own; the claims come from the templates")
	assert.Equal(t, "cache", pod.Volumes[0].Name)

	hs := m.WithDefaults().HeadlessServices()
	require.Len(t, hs, 1)
	assert.Equal(t, "db-pods", hs[0].Name)
	assert.Equal(t, corev1.ClusterIPNone, hs[0].Spec.ClusterIP)
	assert.True(t, hs[0].Spec.PublishNotReadyAddresses)
	assert.Equal(t, map[string]string{AppLabel: "db"}, hs[0].Spec.Selector)
	require.Len(t, hs[0].Spec.Ports, 1)
	assert.Equal(t, int32(5432), hs[0].Spec.Ports[0].Port)
	assert.Empty(t, storageManifest(1, cacheVolume).HeadlessServices(), "a service without a persistent volume has none")
}

// The provider's storage bounds what a manifest may ask for, before
// anything is written: a class it does not offer (or none at all), and
// the lease's volumes, each times its service's replicas, past
// --max-storage; each named with the field and the operator's flag.
func TestVolumesAreCheckedAgainstWhatTheProviderOffers(t *testing.T) {
	l := DefaultLimits()
	l.StorageClasses = []string{"local", "fast"}
	l.Storage = "25Gi"
	require.NoError(t, storageManifest(2, dataVolume, cacheVolume).CheckLimits(l), "2 × 11Gi is within 25Gi")
	require.NoError(t, storageManifest(2, cacheVolume, Volume{Name: "tmp", Size: "11Gi", MountPath: "/tmp"}).CheckLimits(l), "2 × 12Gi is within 25Gi")

	for _, c := range []struct {
		name    string
		m       *Manifest
		limits  func(*Limits)
		path    string
		message string
	}{
		{"no storage offered", storageManifest(1, dataVolume), func(l *Limits) { l.StorageClasses = nil },
			"services[0].volumes[0].persistent", "this provider offers no persistent storage (the operator's --storage-classes)"},
		{"class not offered", storageManifest(1, Volume{Name: "data", Size: "1Gi", MountPath: "/data", Persistent: true, Class: "gold"}), nil,
			"services[0].volumes[0].class", `"gold" is not one of this provider's storage classes (the operator's --storage-classes): use one of local, fast`},
		{"over the lease's storage", storageManifest(3, Volume{Name: "scratch", Size: "10Gi", MountPath: "/scratch"}), nil,
			"services[0].volumes[0].size", "the lease's volumes take 30Gi in all (each volume times its service's replicas): this provider allows at most 25Gi per lease (the operator's --max-storage)"},
		{"ephemeral volumes count too", storageManifest(1, Volume{Name: "scratch", Size: "30Gi", MountPath: "/scratch"}), nil,
			"services[0].volumes[0].size", "this provider allows at most 25Gi per lease"},
		{"the default limit", storageManifest(11, Volume{Name: "scratch", Size: "10Gi", MountPath: "/scratch"}), func(l *Limits) { l.Storage = "" },
			"services[0].volumes[0].size", "this provider allows at most 100Gi per lease"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := l
			if c.limits != nil {
				c.limits(&l)
			}
			require.NoError(t, c.m.Validate())
			err := c.m.CheckLimits(l)
			var v *ValidationError
			require.ErrorAs(t, err, &v)
			require.Len(t, v.Problems, 1, "%v", err)
			assert.Equal(t, c.path, v.Problems[0].Path)
			assert.Contains(t, v.Problems[0].Message, c.message)
		})
	}
}

// Issue 39.1: a running service does not change kind in place, and a
// StatefulSet's claims are fixed: the data is the tenant's, so deployflow
// refuses such a manifest, naming the service and the way to do it (a new
// name), rather than dropping or moving a volume. Its mounts, image and
// everything else may change.
func TestAStorageChangeAStatefulSetCannotFollowIsRefused(t *testing.T) {
	stateless := storageManifest(2, cacheVolume)
	stateful := storageManifest(2, dataVolume)
	bigger := dataVolume
	bigger.Size = "20Gi"
	moved := dataVolume
	moved.MountPath = "/data"
	parallel := storageManifest(2, dataVolume)
	parallel.Services[0].PodManagementPolicy = "Parallel"
	ordered := storageManifest(2, dataVolume)
	ordered.Services[0].PodManagementPolicy = "OrderedReady"
	for _, c := range []struct {
		name       string
		prev, next *Manifest
		message    string // "": allowed
		path       string // "": services[0].volumes
	}{
		{"first deploy", nil, stateful, "", ""},
		{"OrderedReady said, as the default", stateful, ordered, "", ""},
		{"the pod management policy changed", stateful, parallel, "db's StatefulSet was created OrderedReady, and this manifest says Parallel", "services[0].podManagementPolicy"},
		{"unchanged", stateful, storageManifest(3, dataVolume), "", ""},
		{"a mount moved", stateful, storageManifest(2, moved), "", ""},
		{"an ephemeral volume added", stateful, storageManifest(2, dataVolume, cacheVolume), "", ""},
		{"stateless to stateful", stateless, stateful, "db runs as ReplicaSets, and this manifest gives it a persistent volume", ""},
		{"stateful to stateless", stateful, stateless, "db runs as a StatefulSet with persistent volumes, and this manifest has none: its data is yours", ""},
		{"a claim resized", stateful, storageManifest(2, bigger), "db's persistent volumes were [data 10Gi local] and would be [data 20Gi local]", ""},
		{"a size written another way", stateful, storageManifest(2, func() Volume { v := dataVolume; v.Size = "10240Mi"; return v }()), "", ""},
		{"a service removed", stateful, &Manifest{Lease: "shop", Services: []Service{{Name: "web", Image: "nginx:1.27"}}}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := StorageChange(c.prev, c.next)
			if c.message == "" {
				require.NoError(t, err)
				return
			}
			var v *ValidationError
			require.ErrorAs(t, err, &v)
			require.Len(t, v.Problems, 1)
			path := "services[0].volumes"
			if c.path != "" {
				path = c.path
			}
			assert.Equal(t, path, v.Problems[0].Path)
			assert.Contains(t, v.Problems[0].Message, c.message)
		})
	}
}

// Issue 39.2: a stateful service rolls out as a canary of its highest
// ordinals: setWeight, pause and analysis steps and a background analysis
// parse, and its hostname's
// route has one backend (its weight is the ordinals released, not a route
// weight).
func TestAStatefulServiceTakesACanaryOfItsOrdinals(t *testing.T) {
	m, err := Parse([]byte(`lease: shop
services:
  - name: db
    image: postgres:16
    replicas: 3
    rollout:
      strategy: Canary
      steps:
        - setWeight: 34
        - analysis: {job: {image: "ghcr.io/acme/smoke:1"}}
        - pause: {}
      analysis:
        prometheus: {query: 'sum(rate(pg_errors_total[1m]))'}
        successCondition: result < 1
    ports:
      - port: 80
        expose: {http: {hostnames: [db.example.com]}}
    volumes:
      - {name: data, size: 1Gi, mountPath: /data, persistent: true, class: local}
`))
	require.NoError(t, err)
	s, _ := m.Lookup("db")
	assert.True(t, s.Stateful())
	assert.Len(t, s.Rollout.Steps, 3)
	assert.False(t, s.TrafficRouted(), "a stateful canary's weight is its released ordinals, not a route weight")
}

// Issue 39.2: podManagementPolicy Parallel is rendered as the
// StatefulSet's; left out, OrderedReady, upstream's default.
func TestAStatefulServicesPodManagementPolicyIsItsStatefulSets(t *testing.T) {
	m := storageManifest(2, dataVolume)
	sts, err := m.WithDefaults().StatefulSet("db")
	require.NoError(t, err)
	assert.Equal(t, appsv1.OrderedReadyPodManagement, sts.Spec.PodManagementPolicy)
	m.Services[0].PodManagementPolicy = "Parallel"
	sts, err = m.WithDefaults().StatefulSet("db")
	require.NoError(t, err)
	assert.Equal(t, appsv1.ParallelPodManagement, sts.Spec.PodManagementPolicy)
}
