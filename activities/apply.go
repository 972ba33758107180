package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"go.temporal.io/sdk/activity"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/k8s/rollout"
)

// ApplyObjectsInput is a lease's Services, LoadBalancer Services and
// Ingress, as the manifest renders them.
type ApplyObjectsInput struct {
	Namespace string                `json:"namespace"`
	Lease     string                `json:"lease"`
	Services  []*corev1.Service     `json:"services,omitempty"`
	Ingress   *networkingv1.Ingress `json:"ingress,omitempty"`
	// HTTPRoutes replace the Ingress where the operator routes through a
	// Gateway (--routing gateway; routes.go).
	HTTPRoutes []*gatewayv1.HTTPRoute `json:"httpRoutes,omitempty"`
	// DryRun reports what would change and writes nothing (deploy --plan).
	DryRun bool `json:"dryRun,omitempty"`
	// DeployID names the deploy (one run of the chain) doing the apply; a
	// retry of the same apply carries the same one and gets the same answer.
	DeployID string `json:"deployID,omitempty"`
	// Previous are the objects (Kind/name) the lease had after its last
	// apply; those no longer rendered count as pruned even when a retried
	// apply finds them gone already.
	Previous []string `json:"previous,omitempty"`

	// namespace, when set, is the lease's namespace as ApplyDeploy's
	// EnsureNamespace just left it: its owner is not read again.
	namespace *corev1.Namespace
}

// ApplyObjectsResult says what the apply changed.
type ApplyObjectsResult struct {
	Changed []string `json:"changed,omitempty"` // kind/name of objects whose content changed
	Pruned  []string `json:"pruned,omitempty"`  // objects of the lease no longer rendered
	Kept    []string `json:"kept,omitempty"`    // every object the lease has after the apply
}

// Annotations by which an apply tells, from content, whether it changed an
// object: the hash of what deployflow applied, the deploy that last changed
// it, and the hash before that deploy.
const (
	ContentHashAnnotation  = "deployflow.dev/content-hash"
	DeployIDAnnotation     = "deployflow.dev/deploy-id"
	PreviousHashAnnotation = "deployflow.dev/previous-hash"
)

// ApplyObjects server-side-applies the lease's Services and Ingress (field
// manager deployflow, owned by the lease record), then removes the lease's
// Services and Ingresses that the manifest no longer renders. Whether an
// object changed is decided from content: the hash of what deployflow owns
// against the hash the object carries, so a retried apply reports what the
// first attempt did. Applying the same objects twice writes nothing.
func (a *Activities) ApplyObjects(ctx context.Context, in ApplyObjectsInput) (*ApplyObjectsResult, error) {
	res := &ApplyObjectsResult{}
	var owners []metav1.OwnerReference
	switch {
	case in.DryRun:
	case in.namespace != nil && in.namespace.Name == in.Namespace:
		owners = ownedBy(in.namespace.OwnerReferences, crds.KindLease)
	default:
		var err error
		if owners, err = a.namespaceOwnerRefs(ctx, in.Namespace); err != nil {
			return nil, err
		}
	}
	keep := map[string]bool{}
	for _, svc := range in.Services {
		svc = svc.DeepCopy()
		svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		svc.Namespace = in.Namespace
		keep["Service/"+svc.Name] = true
		svcs := a.Kube.CoreV1().Services(in.Namespace)
		changed, err := a.apply(ctx, in, "Service/"+svc.Name, svc, &svc.ObjectMeta, owners,
			func() (metav1.Object, error) { return svcs.Get(ctx, svc.Name, metav1.GetOptions{}) },
			func(body []byte, opts metav1.PatchOptions) error {
				_, err := svcs.Patch(ctx, svc.Name, types.ApplyPatchType, body, opts)
				return err
			})
		if err != nil {
			return nil, err
		}
		if changed {
			res.Changed = append(res.Changed, "Service/"+svc.Name)
		}
	}
	if in.Ingress != nil {
		ing := in.Ingress.DeepCopy()
		ing.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}
		ing.Namespace = in.Namespace
		keep["Ingress/"+ing.Name] = true
		ings := a.Kube.NetworkingV1().Ingresses(in.Namespace)
		changed, err := a.apply(ctx, in, "Ingress/"+ing.Name, ing, &ing.ObjectMeta, owners,
			func() (metav1.Object, error) { return ings.Get(ctx, ing.Name, metav1.GetOptions{}) },
			func(body []byte, opts metav1.PatchOptions) error {
				_, err := ings.Patch(ctx, ing.Name, types.ApplyPatchType, body, opts)
				return err
			})
		if err != nil {
			return nil, err
		}
		if changed {
			res.Changed = append(res.Changed, "Ingress/"+ing.Name)
		}
	}
	if err := a.applyRoutes(ctx, in, owners, keep, res); err != nil {
		return nil, err
	}

	pruned := map[string]bool{}
	for _, o := range in.Previous {
		if !keep[o] {
			pruned[o] = true
		}
	}
	sel := metav1.ListOptions{LabelSelector: LeaseLabel + "=" + in.Lease}
	svcs, err := a.Kube.CoreV1().Services(in.Namespace).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list services of lease %s: %w", in.Lease, err)
	}
	for _, s := range svcs.Items {
		if name := "Service/" + s.Name; !keep[name] {
			if !in.DryRun {
				if err := a.Kube.CoreV1().Services(in.Namespace).Delete(ctx, s.Name, uidPrecondition(s.UID)); err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("delete service %s/%s: %w", in.Namespace, s.Name, err)
				}
			}
			pruned[name] = true
		}
	}
	ings, err := a.Kube.NetworkingV1().Ingresses(in.Namespace).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list ingresses of lease %s: %w", in.Lease, err)
	}
	for _, i := range ings.Items {
		if name := "Ingress/" + i.Name; !keep[name] {
			if !in.DryRun {
				if err := a.Kube.NetworkingV1().Ingresses(in.Namespace).Delete(ctx, i.Name, uidPrecondition(i.UID)); err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("delete ingress %s/%s: %w", in.Namespace, i.Name, err)
				}
			}
			pruned[name] = true
		}
	}
	if err := a.pruneRoutes(ctx, in, keep, pruned); err != nil {
		return nil, err
	}
	res.Pruned = slices.Sorted(maps.Keys(pruned))
	res.Kept = slices.Sorted(maps.Keys(keep))
	sort.Strings(res.Changed)
	return res, nil
}

// LeaseLabel marks every object deployflow creates for a lease.
const LeaseLabel = "deployflow.dev/lease"

func uidPrecondition(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

// contentHash is the hash of what deployflow applies of an object.
func contentHash(obj any) (string, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12]), nil
}

// apply server-side-applies obj (whose metadata is meta), owned by owners,
// and reports whether its content changed, from hashes of obj as rendered
// (without owners and stamps): an object that is missing, or
// whose content hash differs, changes. A retry of the same deploy finds the
// object stamped with its DeployID and answers from the hash the object
// had before that deploy, so it reports what the first attempt did.
func (a *Activities) apply(ctx context.Context, in ApplyObjectsInput, name string, obj any, meta *metav1.ObjectMeta, owners []metav1.OwnerReference,
	get func() (metav1.Object, error), patch func(body []byte, opts metav1.PatchOptions) error) (bool, error) {
	hash, err := contentHash(obj)
	if err != nil {
		return false, invalidInput("%s: %v", name, err)
	}
	live, err := get()
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("get %s/%s: %w", in.Namespace, name, err)
	}
	exists := err == nil
	var ann map[string]string
	if exists {
		ann = live.GetAnnotations()
	}
	stamp := map[string]string{ContentHashAnnotation: hash, DeployIDAnnotation: ann[DeployIDAnnotation], PreviousHashAnnotation: ann[PreviousHashAnnotation]}
	var changed bool
	switch {
	case !exists:
		changed = true
		stamp[DeployIDAnnotation], stamp[PreviousHashAnnotation] = in.DeployID, ""
	case in.DeployID != "" && ann[DeployIDAnnotation] == in.DeployID:
		changed = ann[PreviousHashAnnotation] != hash // a retry: answer as the first attempt did
	default:
		changed = ann[ContentHashAnnotation] != hash
		if changed {
			stamp[DeployIDAnnotation], stamp[PreviousHashAnnotation] = in.DeployID, ann[ContentHashAnnotation]
		}
	}
	if in.DryRun {
		return changed, nil
	}
	if svc, ok := obj.(*corev1.Service); ok && exists {
		keepPin(svc, live)
	}
	meta.OwnerReferences = owners
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	for k, v := range stamp {
		if v != "" {
			meta.Annotations[k] = v
		}
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return false, invalidInput("%s: %v", name, err)
	}
	force := true
	if err := patch(body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return false, invalidInput("the API server rejects %s: %v", name, err)
		}
		return false, fmt.Errorf("apply %s/%s: %w", in.Namespace, name, err)
	}
	return changed, nil
}

// Change classes of a service in a deploy, decided before anything is
// written.
const (
	ChangeNone     = "no-op"         // nothing to write, no new revision
	ChangeScale    = "scale-only"    // replicas change; no new ReplicaSet
	ChangeMetadata = "metadata-only" // Services/Ingress/IPs change; pods stay
	ChangeRollout  = "rollout"       // pod template change: a new revision
)

// ClassifyInput is one service's desired Deployment and, for a stateful
// service, its StatefulSet (issue 39), which it is compared by instead.
type ClassifyInput struct {
	Deployment  *appsv1.Deployment  `json:"deployment"`
	Service     string              `json:"service"`
	StatefulSet *appsv1.StatefulSet `json:"statefulSet,omitempty"`
}

// classifyInput is service svc of m as ClassifyService takes it.
func classifyInput(m *manifest.Manifest, svc string, d *appsv1.Deployment) (ClassifyInput, error) {
	in := ClassifyInput{Deployment: d, Service: svc}
	if s, ok := m.Lookup(svc); ok && s.Stateful() {
		sts, err := m.StatefulSet(svc)
		if err != nil {
			return in, invalidManifest(err)
		}
		in.StatefulSet = sts
	}
	return in, nil
}

// Classification is what deploying a service would do to its workload.
type Classification struct {
	Service string `json:"service"`
	// Class is ChangeNone, ChangeScale or ChangeRollout (the deploy widens
	// ChangeNone to ChangeMetadata when the service's objects change).
	Class string `json:"class"`
	// Current is the live revision's image and replicas, if any.
	CurrentImage    string `json:"currentImage,omitempty"`
	CurrentReplicas int32  `json:"currentReplicas"`
	DesiredImage    string `json:"desiredImage"`
	DesiredReplicas int32  `json:"desiredReplicas"`
	Revision        int64  `json:"revision,omitempty"`
}

// ClassifyService compares the desired Deployment (defaulted by the API
// server, as the rollout engine sees it) with the service's live
// ReplicaSets: the same template already fully rolled out at the same size is
// a no-op; the same template at another size is scale-only; anything else is
// a rollout. It reads only.
func (a *Activities) ClassifyService(ctx context.Context, in ClassifyInput) (*Classification, error) {
	if in.StatefulSet != nil {
		return a.classifyStatefulSet(ctx, in)
	}
	d, err := a.DefaultDeployment(ctx, DefaultDeploymentInput{Deployment: in.Deployment})
	if apierrors.IsNotFound(err) {
		// No namespace yet (a first deploy being planned): nothing runs.
		return classifyNew(in.Service, in.Deployment, a.allowedCapabilities())
	}
	if err != nil {
		return nil, err
	}
	st, err := a.ReadRolloutState(ctx, ServiceRef{Namespace: d.Namespace, Service: in.Service})
	if err != nil {
		return nil, err
	}
	c := classify(d, st.ReplicaSets)
	c.Service = in.Service
	return c, nil
}

func classify(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) *Classification {
	c := &Classification{DesiredReplicas: *d.Spec.Replicas, Class: ChangeRollout}
	if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
		c.DesiredImage = cs[0].Image
	}
	active := rollout.FindActiveOrLatest(nil, rsList)
	if active != nil {
		c.CurrentReplicas = *active.Spec.Replicas
		if cs := active.Spec.Template.Spec.Containers; len(cs) > 0 {
			c.CurrentImage = cs[0].Image
		}
		c.Revision, _ = rollout.Revision(active)
	}
	newRS := rollout.FindNewReplicaSet(d, rsList)
	if newRS == nil {
		return c
	}
	rev, _ := rollout.Revision(newRS)
	if rev != rollout.MaxRevision(rsList) {
		return c // an older revision comes back: a rollout (undo)
	}
	_, oldRSs := rollout.FindOldReplicaSets(d, rsList)
	if rollout.GetReplicaCountForReplicaSets(oldRSs) > 0 {
		return c // a rollout is still under way
	}
	c.CurrentReplicas = *newRS.Spec.Replicas
	c.Class = ChangeScale
	if *newRS.Spec.Replicas == *d.Spec.Replicas {
		c.Class = ChangeNone
	}
	return c
}

// DeleteNamespace deletes the lease's namespace and waits until it is gone
// (the namespace controller removes everything in it). NotFound is success.
func (a *Activities) DeleteNamespace(ctx context.Context, name string) error {
	ns, err := a.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get namespace %s: %w", name, err)
	case !ManagedNamespace(ns):
		return notAllowed(name, "is not managed by deployflow, so teardown will not delete it")
	}
	err = a.Kube.CoreV1().Namespaces().Delete(ctx, name, uidPrecondition(ns.UID))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	for {
		_, err := a.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get namespace %s: %w", name, err)
		}
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// keepPin keeps the version a blue-green's live Service selects: the deploy
// renders its selector without one, the rollout moves it
// (PinServices). It is left out of the content hash, so a pin never counts
// as a change of the Service.
func keepPin(svc *corev1.Service, live metav1.Object) {
	l, ok := live.(*corev1.Service)
	if !ok || svc.Labels[manifest.RoleLabel] == "" {
		return
	}
	if h := l.Spec.Selector[manifest.PodTemplateHashLabel]; h != "" {
		svc.Spec.Selector = maps.Clone(svc.Spec.Selector)
		svc.Spec.Selector[manifest.PodTemplateHashLabel] = h
	}
}
