package manifest

import (
	"fmt"
	"path"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kptr "k8s.io/utils/ptr"
)

// What disks a service's container mounts (issue 39.1), as an Akash SDL
// writes its storage: named volumes of a size, each mounted at a path,
// persistent or ephemeral.
//
//   - An ephemeral volume is an emptyDir of at most its size on the
//     node's disk: it starts empty with each pod and goes with it.
//   - A persistent volume is a PersistentVolumeClaim of one of the
//     provider's storage classes (--storage-classes), one per pod: a
//     service with one runs as a StatefulSet (with a headless Service
//     for its pods' names), each pod keeping its claim, and so its data,
//     across restarts, updates and rollbacks. A claim is deleted only
//     with the lease.
//
// Every volume's size counts against the operator's --max-storage for the
// whole lease (times its service's replicas), and the lease namespace's
// quota holds the claims.

// Volume is a disk a service's container mounts.
type Volume struct {
	// Name is a DNS-1123 label of at most MaxVolumeNameLength characters,
	// unique in the service. A persistent volume's claims are named
	// <name>-<service>-<ordinal>.
	Name string `json:"name"`
	// Size is a Kubernetes quantity (10Gi, 500Mi): the claim's request, or
	// the emptyDir's size limit.
	Size string `json:"size"`
	// MountPath is where the container sees it: an absolute, clean path,
	// unique in the service.
	MountPath string `json:"mountPath"`
	// ReadOnly mounts a persistent volume read-only.
	ReadOnly bool `json:"readOnly,omitempty"`
	// Persistent makes the volume a claim that outlives its pod; without
	// it, the volume is ephemeral.
	Persistent bool `json:"persistent,omitempty"`
	// Class is a persistent volume's storage class: one of the provider's
	// (--storage-classes). Required for a persistent volume.
	Class string `json:"class,omitempty"`
}

// The bounds of a service's volumes.
const (
	// MaxVolumes bounds a service's volumes.
	MaxVolumes = 8
	// MaxVolumeNameLength keeps a claim's name, <volume>-<service>-<ordinal>,
	// within a DNS label with the longest service name and ordinal.
	MaxVolumeNameLength = 16
)

// HeadlessServiceSuffix names a stateful service's headless Service,
// <service>-pods: its pods are <service>-<ordinal>.<service>-pods.
const HeadlessServiceSuffix = "-pods"

// HeadlessService names the headless Service that gives a stateful
// service's pods their names.
func HeadlessService(svc string) string { return svc + HeadlessServiceSuffix }

// reservedMountPaths are where a volume may not be mounted: the kernel's and
// the kubelet's own.
var reservedMountPaths = []string{"/dev", "/proc", "/sys", "/var/run/secrets", "/run/secrets"}

// Stateful reports whether the service has a persistent volume: it then runs
// as a StatefulSet, not as ReplicaSets.
func (s *Service) Stateful() bool {
	return slices.ContainsFunc(s.Volumes, func(v Volume) bool { return v.Persistent })
}

// StatefulServices are the names of m's stateful services, in order.
func (m *Manifest) StatefulServices() []string {
	var out []string
	for i := range m.Services {
		if m.Services[i].Stateful() {
			out = append(out, m.Services[i].Name)
		}
	}
	return out
}

func (v *validator) volumes(p string, s *Service) {
	vp := field(p, "volumes")
	if len(s.Volumes) > MaxVolumes {
		v.add(vp, "%d volumes: a service has at most %d", len(s.Volumes), MaxVolumes)
	}
	names, mounts := map[string]int{}, map[string]int{}
	for i, vol := range s.Volumes {
		ip := index(vp, i)
		switch np := field(ip, "name"); {
		case vol.Name == "":
			v.add(np, "is required: name the volume like data (lowercase letters, digits and '-')")
		case len(vol.Name) > MaxVolumeNameLength:
			v.add(np, "%q is %d characters long: volume names have at most %d (its claims are named <volume>-<service>-<ordinal>)", vol.Name, len(vol.Name), MaxVolumeNameLength)
		case len(validation.IsDNS1123Label(vol.Name)) > 0:
			v.add(np, "%q is not a valid volume name: use lowercase letters, digits and '-', starting and ending with a letter or digit%s", vol.Name, lowerHint(vol.Name, func(x string) bool { return len(validation.IsDNS1123Label(x)) == 0 }))
		default:
			if j, dup := names[vol.Name]; dup {
				v.add(np, "%q is already the name of %s: volume names are unique in a service", vol.Name, index(vp, j))
			} else {
				names[vol.Name] = i
			}
		}
		if vol.Size == "" {
			v.add(field(ip, "size"), "is required: give the volume's size, e.g. 10Gi")
		} else {
			v.quantity(field(ip, "size"), vol.Size, "10Gi or 500Mi")
		}
		mp := field(ip, "mountPath")
		switch msg := mountPathProblem(vol.MountPath); {
		case msg != "":
			v.add(mp, "%s", msg)
		default:
			if j, dup := mounts[vol.MountPath]; dup {
				v.add(mp, "%q is already where %s is mounted: give each volume its own path", vol.MountPath, index(vp, j))
			} else {
				mounts[vol.MountPath] = i
			}
		}
		switch {
		case vol.Persistent && vol.Class == "":
			v.add(field(ip, "class"), "is required for a persistent volume: name one of the provider's storage classes")
		case vol.Persistent && len(validation.IsDNS1123Subdomain(vol.Class)) > 0:
			v.add(field(ip, "class"), "%q is not a storage class name: use lowercase letters, digits, '-' and '.'", vol.Class)
		case !vol.Persistent && vol.Class != "":
			v.add(field(ip, "class"), "is only for a persistent volume: add persistent: true, or leave class out (an ephemeral volume is on the node's disk)")
		case !vol.Persistent && vol.ReadOnly:
			v.add(field(ip, "readOnly"), "an ephemeral volume starts empty: mounted read-only, it would stay empty; leave readOnly out, or make the volume persistent")
		}
	}
	if slices.ContainsFunc(s.Volumes, func(v Volume) bool { return !v.Persistent }) && (s.Resources == nil || s.Resources.EphemeralStorage == "") {
		// The volumes' sizes are added to it: without it, the container's
		// limit would be the volumes' alone, nothing left for its logs
		// and writable layer, and the kubelet would evict a pod whose
		// volume is full.
		v.add(field(p, "resources.ephemeralStorage"), "is required with an ephemeral volume: give the disk the container's logs and writable layer take beside its volumes, e.g. 256Mi (the volumes' sizes are added to it)")
	}
	switch pm := s.PodManagementPolicy; {
	case pm == "":
	case !s.Stateful():
		v.add(field(p, "podManagementPolicy"), "is for a service with a persistent volume (a StatefulSet): leave it out")
	case pm != string(appsv1.OrderedReadyPodManagement) && pm != string(appsv1.ParallelPodManagement):
		v.add(field(p, "podManagementPolicy"), "%q: want OrderedReady (the default) or Parallel", pm)
	}
	if s.Stateful() {
		if r := s.Rollout; r != nil {
			switch r.Strategy {
			case "", StrategyRollingUpdate:
			case StrategyCanary:
				// Its canary is the ordinals a setWeight releases, judged by
				// the analysis steps after it and its background analysis
				// (issue 39.2).
				for i, step := range r.Steps {
					if step.SetCanaryScale != nil {
						v.add(field(index(field(p, "rollout.steps"), i), "setCanaryScale"), "a stateful service's canary is the ordinals its setWeight releases: it has no canary pods to scale apart; use setWeight")
					}
				}
				if r.ScaleDownDelaySeconds != nil {
					v.add(field(p, "rollout.scaleDownDelaySeconds"), "a stateful service has no canary pods apart to keep: leave it out")
				}
			default:
				v.add(field(p, "rollout.strategy"), "%s: a service with a persistent volume is a StatefulSet, which rolls out pod by pod (RollingUpdate, the default) or as a canary of its highest ordinals (Canary)", r.Strategy)
			}
		}
		if s.Name != "" {
			v.previewOf[HeadlessService(s.Name)] = use{path: field(p, "name"), svc: s.Name, role: "pods' headless"}
		}
	}
}

// mountPathProblem says what is wrong with a mount path, or "".
func mountPathProblem(p string) string {
	switch {
	case p == "":
		return "is required: give the path the container sees the volume at, e.g. /data"
	case !strings.HasPrefix(p, "/"):
		return fmt.Sprintf("%q is not an absolute path: start it with '/', e.g. /data", p)
	case len(p) > 256:
		return fmt.Sprintf("%q is %d characters long: a mount path has at most 256", truncate(p, 40), len(p))
	case path.Clean(p) != p || slices.Contains(strings.Split(p, "/"), ".."):
		return fmt.Sprintf("%q is not a clean path: write it as %q", p, path.Clean(p))
	case p == "/":
		return "\"/\" would hide the image's whole file system: mount the volume at a directory, e.g. /data"
	case strings.ContainsAny(p, ":\\") || !printable(p):
		return fmt.Sprintf("%q has a character a mount path may not have (':', '\\' or a control character)", p)
	}
	for _, r := range reservedMountPaths {
		if p == r || strings.HasPrefix(p, r+"/") {
			return fmt.Sprintf("%q is under %s, which the kernel or the kubelet mounts: choose another path, e.g. /data", p, r)
		}
	}
	return ""
}

// checkStorage is CheckLimits for volumes: each persistent volume of one of
// the provider's classes, and the lease's volumes (times their service's
// replicas) within its storage.
func (m *Manifest) checkStorage(v *problems, classes []string, limit resource.Quantity) {
	total := resource.Quantity{}
	var first string // the first volume past the limit
	for i := range m.Services {
		s := &m.Services[i]
		replicas := int64(DefaultReplicas)
		if s.Replicas != nil {
			replicas = int64(*s.Replicas)
		}
		for j, vol := range s.Volumes {
			ip := index(field(index("services", i), "volumes"), j)
			switch {
			case !vol.Persistent:
			case len(classes) == 0:
				v.add(field(ip, "persistent"), "this provider offers no persistent storage (the operator's --storage-classes): use an ephemeral volume, or a provider that does")
			case !slices.Contains(classes, vol.Class):
				v.add(field(ip, "class"), "%q is not one of this provider's storage classes (the operator's --storage-classes): use one of %s", vol.Class, strings.Join(classes, ", "))
			}
			q, err := resource.ParseQuantity(vol.Size)
			if err != nil {
				continue // Validate named it
			}
			for range replicas {
				total.Add(q)
			}
			if first == "" && total.Cmp(limit) > 0 {
				first = field(ip, "size")
			}
		}
	}
	if first != "" {
		v.add(first, "the lease's volumes take %s in all (each volume times its service's replicas): this provider allows at most %s per lease (the operator's --max-storage)", total.String(), limit.String())
	}
}

// ephemeralVolumes is the sum of s's ephemeral volumes' sizes: the node
// disk its container's ephemeral-storage request and limit add to
// resources.ephemeralStorage (the kubelet counts an emptyDir against its
// pod's limit, and the lease's quota holds it).
func (s *Service) ephemeralVolumes() (resource.Quantity, error) {
	var sum resource.Quantity
	for _, vol := range s.Volumes {
		if vol.Persistent {
			continue
		}
		q, err := resource.ParseQuantity(vol.Size)
		if err != nil {
			return sum, fmt.Errorf("manifest: service %s: volume %s: size %q: %w", s.Name, vol.Name, vol.Size, err)
		}
		sum.Add(q)
	}
	return sum, nil
}

// podVolumes mounts s's volumes in its pod's container: an ephemeral one
// as an emptyDir of at most its size, a persistent one as the claim its
// StatefulSet's claim template of the same name makes for each pod.
func (s *Service) podVolumes(spec *corev1.PodSpec) error {
	for _, vol := range s.Volumes {
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{
			Name: vol.Name, MountPath: vol.MountPath, ReadOnly: vol.ReadOnly,
		})
		if vol.Persistent {
			continue
		}
		q, err := resource.ParseQuantity(vol.Size)
		if err != nil {
			return fmt.Errorf("manifest: service %s: volume %s: size %q: %w", s.Name, vol.Name, vol.Size, err)
		}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: vol.Name, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &q},
		}})
	}
	return nil
}

// StatefulSet is stateful service svc as the StatefulSet deployflow applies:
// its Deployment's pod template and replicas, a claim template per
// persistent volume, its pods named by HeadlessService(svc), and its
// claims retained when it is scaled down or deleted (a claim goes with
// its lease's namespace, or when the operator deletes it). Its update
// strategy is RollingUpdate with the partition at its replicas: the
// StatefulSet controller replaces no pod until deployflow lowers the
// partition, step by step.
func (m *Manifest) StatefulSet(svc string) (*appsv1.StatefulSet, error) {
	d, err := m.Deployment(svc)
	if err != nil {
		return nil, err
	}
	s, _ := m.Lookup(svc)
	if !s.Stateful() {
		return nil, fmt.Errorf("manifest: service %s has no persistent volume: it runs as ReplicaSets", svc)
	}
	var claims []corev1.PersistentVolumeClaim
	for _, vol := range s.Volumes {
		if !vol.Persistent {
			continue
		}
		q, err := resource.ParseQuantity(vol.Size)
		if err != nil {
			return nil, fmt.Errorf("manifest: service %s: volume %s: size %q: %w", svc, vol.Name, vol.Size, err)
		}
		class := vol.Class
		claims = append(claims, corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: vol.Name, Labels: objectLabels(m.Lease, svc)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &class,
				VolumeMode:       kptr.To(corev1.PersistentVolumeFilesystem),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
			},
		})
	}
	partition := *d.Spec.Replicas
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: d.ObjectMeta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:             clonePtr(d.Spec.Replicas),
			Selector:             d.Spec.Selector,
			Template:             d.Spec.Template,
			VolumeClaimTemplates: claims,
			ServiceName:          HeadlessService(svc),
			PodManagementPolicy:  s.podManagement(),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &partition},
			},
			MinReadySeconds:      d.Spec.MinReadySeconds,
			RevisionHistoryLimit: d.Spec.RevisionHistoryLimit,
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
	}, nil
}

// podManagement is s's StatefulSet's pod management policy.
func (s *Service) podManagement() appsv1.PodManagementPolicyType {
	if s.PodManagementPolicy == string(appsv1.ParallelPodManagement) {
		return appsv1.ParallelPodManagement
	}
	return appsv1.OrderedReadyPodManagement
}

// HeadlessServices are the headless Services of m's stateful services: each
// selects its service's pods, publishing them before they are Ready (a
// database's members find each other while they start).
func (m *Manifest) HeadlessServices() []*corev1.Service {
	var out []*corev1.Service
	for _, name := range m.StatefulServices() {
		s, _ := m.Lookup(name)
		svc := service(m.Lease, HeadlessService(name), name)
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		svc.Spec.PublishNotReadyAddresses = true
		for _, p := range s.Ports {
			svc.Spec.Ports = append(svc.Spec.Ports, servicePort(p))
		}
		out = append(out, svc)
	}
	return out
}

// StorageChange returns a *ValidationError if next changes a service's
// storage in a way its running StatefulSet cannot follow: a service
// turning stateful or stateless (its data is the tenant's: deployflow
// neither moves nor drops it), or a persistent volume added, removed or
// changed in name, size or class (a StatefulSet's claim templates are
// fixed). prev is the last manifest deployed (nil: none).
func StorageChange(prev, next *Manifest) error {
	if prev == nil || next == nil {
		return nil
	}
	var v problems
	for i := range next.Services {
		s := &next.Services[i]
		old, ok := prev.Lookup(s.Name)
		if !ok {
			continue
		}
		p := field(index("services", i), "volumes")
		switch {
		case old.Stateful() && !s.Stateful():
			v.add(p, "%s runs as a StatefulSet with persistent volumes, and this manifest has none: its data is yours, and deployflow does not drop it; to run %s without them, deploy it under a new name (the old claims stay until the lease is torn down)", s.Name, s.Name)
		case !old.Stateful() && s.Stateful():
			v.add(p, "%s runs as ReplicaSets, and this manifest gives it a persistent volume: a service does not change kind in place; deploy the stateful version under a new name, then remove %s", s.Name, s.Name)
		case s.Stateful() && old.podManagement() != s.podManagement():
			v.add(field(index("services", i), "podManagementPolicy"), "%s's StatefulSet was created %s, and this manifest says %s: a StatefulSet's pod management policy is fixed once created; deploy it under a new service name to change it", s.Name, old.podManagement(), s.podManagement())
		case s.Stateful() && !slices.Equal(claimsOf(&old), claimsOf(s)):
			v.add(p, "%s's persistent volumes were %s and would be %s: a StatefulSet's claims are fixed once created (name, size and class); deploy the new layout under a new service name", s.Name, describeClaims(claimsOf(&old)), describeClaims(claimsOf(s)))
		}
	}
	return v.err()
}

// claimsOf is s's persistent volumes as its claim templates see them.
func claimsOf(s *Service) []string {
	var out []string
	for _, vol := range s.Volumes {
		if vol.Persistent {
			size := vol.Size
			if q, err := resource.ParseQuantity(vol.Size); err == nil {
				size = q.String() // 10240Mi is 10Gi
			}
			out = append(out, vol.Name+" "+size+" "+vol.Class)
		}
	}
	slices.Sort(out)
	return out
}

func describeClaims(c []string) string {
	if len(c) == 0 {
		return "none"
	}
	return "[" + strings.Join(c, "; ") + "]"
}

func ptrTo[T any](v T) *T { return &v }
