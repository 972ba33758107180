package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"time"

	"go.temporal.io/sdk/activity"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deployflow/deployflow/k8s/rollout"
)

// ApplyObjectsInput is a lease's Services, LoadBalancer Services and
// Ingress, as the manifest renders them.
type ApplyObjectsInput struct {
	Namespace string                `json:"namespace"`
	Lease     string                `json:"lease"`
	Services  []*corev1.Service     `json:"services,omitempty"`
	Ingress   *networkingv1.Ingress `json:"ingress,omitempty"`
	// DryRun reports what would change and writes nothing (deploy --plan).
	DryRun bool `json:"dryRun,omitempty"`
}

// ApplyObjectsResult says what the apply changed.
type ApplyObjectsResult struct {
	Changed []string `json:"changed,omitempty"` // kind/name of objects whose content changed
	Pruned  []string `json:"pruned,omitempty"`  // objects of the lease no longer rendered
}

// ApplyObjects server-side-applies the lease's Services and Ingress (field
// manager deployflow), then removes the lease's Services and Ingresses that
// the manifest no longer renders. Applying the same objects twice changes
// nothing, so it is safe to retry.
func (a *Activities) ApplyObjects(ctx context.Context, in ApplyObjectsInput) (*ApplyObjectsResult, error) {
	res := &ApplyObjectsResult{}
	keepSvc := map[string]bool{}
	for _, svc := range in.Services {
		svc = svc.DeepCopy()
		svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		svc.Namespace = in.Namespace
		keepSvc[svc.Name] = true
		changed, err := a.apply(ctx, in.DryRun, "services", svc.Name, svc, func(body []byte, opts metav1.PatchOptions) (metav1.Object, error) {
			return a.Kube.CoreV1().Services(in.Namespace).Patch(ctx, svc.Name, types.ApplyPatchType, body, opts)
		})
		if err != nil {
			return nil, err
		}
		if changed {
			res.Changed = append(res.Changed, "Service/"+svc.Name)
		}
	}
	keepIng := map[string]bool{}
	if in.Ingress != nil {
		ing := in.Ingress.DeepCopy()
		ing.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}
		ing.Namespace = in.Namespace
		keepIng[ing.Name] = true
		changed, err := a.apply(ctx, in.DryRun, "ingresses", ing.Name, ing, func(body []byte, opts metav1.PatchOptions) (metav1.Object, error) {
			return a.Kube.NetworkingV1().Ingresses(in.Namespace).Patch(ctx, ing.Name, types.ApplyPatchType, body, opts)
		})
		if err != nil {
			return nil, err
		}
		if changed {
			res.Changed = append(res.Changed, "Ingress/"+ing.Name)
		}
	}

	sel := metav1.ListOptions{LabelSelector: LeaseLabel + "=" + in.Lease}
	svcs, err := a.Kube.CoreV1().Services(in.Namespace).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list services of lease %s: %w", in.Lease, err)
	}
	for _, s := range svcs.Items {
		if keepSvc[s.Name] {
			continue
		}
		if in.DryRun {
			res.Pruned = append(res.Pruned, "Service/"+s.Name)
			continue
		}
		if err := a.Kube.CoreV1().Services(in.Namespace).Delete(ctx, s.Name, uidPrecondition(s.UID)); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete service %s/%s: %w", in.Namespace, s.Name, err)
		}
		res.Pruned = append(res.Pruned, "Service/"+s.Name)
	}
	ings, err := a.Kube.NetworkingV1().Ingresses(in.Namespace).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list ingresses of lease %s: %w", in.Lease, err)
	}
	for _, i := range ings.Items {
		if keepIng[i.Name] {
			continue
		}
		if in.DryRun {
			res.Pruned = append(res.Pruned, "Ingress/"+i.Name)
			continue
		}
		if err := a.Kube.NetworkingV1().Ingresses(in.Namespace).Delete(ctx, i.Name, uidPrecondition(i.UID)); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete ingress %s/%s: %w", in.Namespace, i.Name, err)
		}
		res.Pruned = append(res.Pruned, "Ingress/"+i.Name)
	}
	sort.Strings(res.Changed)
	sort.Strings(res.Pruned)
	return res, nil
}

// LeaseLabel marks every object deployflow creates for a lease.
const LeaseLabel = "deployflow.dev/lease"

func uidPrecondition(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

// apply server-side-applies obj and reports whether its resourceVersion
// moved (the content changed).
func (a *Activities) apply(ctx context.Context, dryRun bool, resource, name string, obj any,
	patch func(body []byte, opts metav1.PatchOptions) (metav1.Object, error)) (bool, error) {
	body, err := json.Marshal(obj)
	if err != nil {
		return false, invalidInput("%s %s: %v", resource, name, err)
	}
	force := true
	dry, err := patch(body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force, DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return false, invalidInput("the API server rejects %s %s: %v", resource, name, err)
		}
		return false, fmt.Errorf("apply %s %s (dry run): %w", resource, name, err)
	}
	if dryRun {
		// A dry run does not say whether it would write: compare with the
		// live object.
		return a.wouldChange(ctx, resource, name, dry)
	}
	got, err := patch(body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if err != nil {
		return false, fmt.Errorf("apply %s %s: %w", resource, name, err)
	}
	// A dry run reports the current resourceVersion (none for a new object);
	// the real apply moves it only if it wrote something.
	return got.GetResourceVersion() != dry.GetResourceVersion(), nil
}

// wouldChange compares a dry-run result with the live object: a missing
// object, or one whose managed content differs, would change.
func (a *Activities) wouldChange(ctx context.Context, resource, name string, dry metav1.Object) (bool, error) {
	var live metav1.Object
	var err error
	switch resource {
	case "services":
		live, err = a.Kube.CoreV1().Services(dry.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
	case "ingresses":
		live, err = a.Kube.NetworkingV1().Ingresses(dry.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
	default:
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get %s %s: %w", resource, name, err)
	}
	// A dry run that changes nothing returns the live object unchanged:
	// same generation and same managed fields.
	return dry.GetGeneration() != live.GetGeneration() || !reflect.DeepEqual(stripTimes(dry.GetManagedFields()), stripTimes(live.GetManagedFields())) ||
		!reflect.DeepEqual(dry.GetLabels(), live.GetLabels()) || !reflect.DeepEqual(dry.GetAnnotations(), live.GetAnnotations()), nil
}

func stripTimes(mf []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	out := make([]metav1.ManagedFieldsEntry, len(mf))
	for i, e := range mf {
		e.Time = nil
		out[i] = e
	}
	return out
}

// Change classes of a service in a deploy, decided before anything is
// written.
const (
	ChangeNone     = "no-op"         // nothing to write, no new revision
	ChangeScale    = "scale-only"    // replicas change; no new ReplicaSet
	ChangeMetadata = "metadata-only" // Services/Ingress/IPs change; pods stay
	ChangeRollout  = "rollout"       // pod template change: a new revision
)

// ClassifyInput is one service's desired Deployment.
type ClassifyInput struct {
	Deployment *appsv1.Deployment `json:"deployment"`
	Service    string             `json:"service"`
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
	d, err := a.DefaultDeployment(ctx, DefaultDeploymentInput{Deployment: in.Deployment})
	if apierrors.IsNotFound(err) {
		// No namespace yet (a first deploy being planned): nothing runs.
		c := classify(in.Deployment, nil)
		c.Service = in.Service
		return c, nil
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

// HealthInput names the services whose availability to check.
type HealthInput struct {
	Namespace string   `json:"namespace"`
	Services  []string `json:"services"`
}

// ServiceHealth is one service's availability.
type ServiceHealth struct {
	Service   string `json:"service"`
	Desired   int32  `json:"desired"`
	Available int32  `json:"available"`
}

// CheckHealth reads each service's ReplicaSets and reports desired vs
// available replicas. It does not retry for long: the monitor treats an
// error as "unknown" (the API server is unreachable), never as unhealthy.
func (a *Activities) CheckHealth(ctx context.Context, in HealthInput) ([]ServiceHealth, error) {
	out := make([]ServiceHealth, 0, len(in.Services))
	for _, svc := range in.Services {
		st, err := a.ReadRolloutState(ctx, ServiceRef{Namespace: in.Namespace, Service: svc})
		if err != nil {
			return nil, err
		}
		h := ServiceHealth{Service: svc}
		for _, rs := range st.ReplicaSets {
			if rs.Spec.Replicas != nil {
				h.Desired += *rs.Spec.Replicas
			}
			h.Available += rs.Status.AvailableReplicas
		}
		out = append(out, h)
	}
	activity.GetLogger(ctx).Debug("health", "namespace", in.Namespace, "services", out)
	return out, nil
}

// DeleteNamespace deletes the lease's namespace and waits until it is gone
// (the namespace controller removes everything in it). NotFound is success.
func (a *Activities) DeleteNamespace(ctx context.Context, name string) error {
	err := a.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
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
