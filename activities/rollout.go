package activities

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/deployflow/deployflow/k8s/rollout"
)

// ServiceLabel marks the ReplicaSets deployflow manages for one service; the
// rollout engine only ever looks at and touches ReplicaSets carrying it.
const ServiceLabel = "deployflow.dev/service"

// ErrStalePlan: the cluster changed under a decision (someone else scaled the
// ReplicaSet). Not retried: the workflow re-reads the cluster and decides
// again.
const ErrStalePlan = "StalePlan"

// RolloutState is what the rollout engine reads of the cluster for one
// service: its ReplicaSets and how many of their pods are still running.
type RolloutState struct {
	ReplicaSets []*appsv1.ReplicaSet `json:"replicaSets"`
	// ActivePods counts, per owning ReplicaSet UID, the pods that are neither
	// Succeeded nor Failed (terminating pods count): Recreate waits for the
	// old ones to reach zero.
	ActivePods map[types.UID]int32 `json:"activePods,omitempty"`
	// ResourceVersion of the ReplicaSet list, where a wait starts watching.
	ResourceVersion string `json:"resourceVersion"`
	// PodsResourceVersion of the pod list.
	PodsResourceVersion string `json:"podsResourceVersion,omitempty"`
}

// ServiceRef names one service's ReplicaSets (by ServiceLabel) and pods
// (by the Deployment's selector).
type ServiceRef struct {
	Namespace   string `json:"namespace"`
	Service     string `json:"service"`
	PodSelector string `json:"podSelector"`
}

func (r ServiceRef) selector() string { return ServiceLabel + "=" + r.Service }

// ReadRolloutState lists the service's ReplicaSets (sorted by name) and
// counts their active pods.
func (a *Activities) ReadRolloutState(ctx context.Context, ref ServiceRef) (*RolloutState, error) {
	rsList, err := a.Kube.AppsV1().ReplicaSets(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: ref.selector()})
	if err != nil {
		return nil, fmt.Errorf("list replicasets of %s/%s: %w", ref.Namespace, ref.Service, err)
	}
	podList, err := a.Kube.CoreV1().Pods(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: ref.PodSelector})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s/%s: %w", ref.Namespace, ref.Service, err)
	}
	st := &RolloutState{ResourceVersion: rsList.ResourceVersion, PodsResourceVersion: podList.ResourceVersion}
	for i := range rsList.Items {
		st.ReplicaSets = append(st.ReplicaSets, slim(&rsList.Items[i]))
	}
	sort.Slice(st.ReplicaSets, func(i, j int) bool { return st.ReplicaSets[i].Name < st.ReplicaSets[j].Name })
	for _, p := range podList.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if owner := metav1.GetControllerOf(&p); owner != nil {
			if st.ActivePods == nil {
				st.ActivePods = map[types.UID]int32{}
			}
			st.ActivePods[owner.UID]++
		}
	}
	return st, nil
}

// WaitForChangeInput says where a wait starts and how long it may last.
type WaitForChangeInput struct {
	ServiceRef
	ResourceVersion     string `json:"resourceVersion"`
	PodsResourceVersion string `json:"podsResourceVersion,omitempty"`
	// WatchPods also wakes on pod changes (Recreate waits for old pods to go).
	WatchPods bool `json:"watchPods,omitempty"`
	// Timeout ends the wait with the current state even if nothing changed
	// (the workflow's progress-deadline re-check).
	Timeout time.Duration `json:"timeout"`
}

// WaitForChange watches the service's ReplicaSets (and pods, if asked) from
// the given resource versions and returns the fresh state as soon as anything
// changes, or when Timeout passes. It heartbeats while it waits. Retrying it
// is safe: a retry starts from a fresh list, which is itself a change.
func (a *Activities) WaitForChange(ctx context.Context, in WaitForChangeInput) (*RolloutState, error) {
	if in.Timeout <= 0 {
		return nil, invalidInput("waitForChange: timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, in.Timeout)
	defer cancel()
	rsWatch, err := a.Kube.AppsV1().ReplicaSets(in.Namespace).Watch(ctx,
		metav1.ListOptions{LabelSelector: in.selector(), ResourceVersion: in.ResourceVersion})
	if err != nil {
		return a.afterWait(ctx, in, fmt.Errorf("watch replicasets of %s/%s: %w", in.Namespace, in.Service, err))
	}
	defer rsWatch.Stop()
	podEvents := make(<-chan watch.Event)
	if in.WatchPods {
		podWatch, err := a.Kube.CoreV1().Pods(in.Namespace).Watch(ctx,
			metav1.ListOptions{LabelSelector: in.PodSelector, ResourceVersion: in.PodsResourceVersion})
		if err != nil {
			return a.afterWait(ctx, in, fmt.Errorf("watch pods of %s/%s: %w", in.Namespace, in.Service, err))
		}
		defer podWatch.Stop()
		podEvents = podWatch.ResultChan()
	}

	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return a.afterWait(ctx, in, nil)
		case <-tick.C:
			activity.RecordHeartbeat(ctx)
		case ev, ok := <-rsWatch.ResultChan():
			if !ok || ev.Type != watch.Bookmark {
				return a.afterWait(ctx, in, nil)
			}
		case ev, ok := <-podEvents:
			if !ok || ev.Type != watch.Bookmark {
				return a.afterWait(ctx, in, nil)
			}
		}
	}
}

// afterWait reads the state once the wait ends. The wait's own deadline
// passing is normal; the read then uses a fresh context.
func (a *Activities) afterWait(ctx context.Context, in WaitForChangeInput, watchErr error) (*RolloutState, error) {
	if watchErr != nil {
		return nil, watchErr
	}
	readCtx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		readCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
	}
	return a.ReadRolloutState(readCtx, in.ServiceRef)
}

// ScaleInput is one absolute scale decided by the rollout engine.
type ScaleInput struct {
	Namespace string          `json:"namespace"`
	Op        rollout.ScaleOp `json:"op"`
	UID       types.UID       `json:"uid"`
}

// ScaleReplicaSet sets spec.replicas and the desired/max-replicas
// annotations to the decided values. It is idempotent: a ReplicaSet already
// at the target is left alone. It refuses (ErrStalePlan) when the ReplicaSet
// is neither at the size the decision started from nor at the target, or was
// replaced (another UID): someone else changed it. The write carries the read
// resourceVersion, so a concurrent change makes it fail and retry.
func (a *Activities) ScaleReplicaSet(ctx context.Context, in ScaleInput) (*appsv1.ReplicaSet, error) {
	rss := a.Kube.AppsV1().ReplicaSets(in.Namespace)
	rs, err := rss.Get(ctx, in.Op.ReplicaSet, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, stalePlan("replicaset %s/%s is gone", in.Namespace, in.Op.ReplicaSet)
		}
		return nil, fmt.Errorf("get replicaset %s/%s: %w", in.Namespace, in.Op.ReplicaSet, err)
	}
	if in.UID != "" && rs.UID != in.UID {
		return nil, stalePlan("replicaset %s/%s was replaced", in.Namespace, in.Op.ReplicaSet)
	}
	want := in.Op.ApplyTo(rs)
	current := *rs.Spec.Replicas
	if current == in.Op.To && !rollout.ReplicasAnnotationsNeedUpdate(rs, in.Op.DesiredReplicas, in.Op.MaxReplicas) {
		return slim(rs), nil // done already (a retry after a lost response)
	}
	if current != in.Op.From && current != in.Op.To {
		return nil, stalePlan("replicaset %s/%s has %d replicas, the decision assumed %d", in.Namespace, rs.Name, current, in.Op.From)
	}
	got, err := rss.Update(ctx, want, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("scale replicaset %s/%s to %d: %w", in.Namespace, rs.Name, in.Op.To, err)
	}
	activity.GetLogger(ctx).Info(in.Op.Reason, "namespace", in.Namespace)
	return slim(got), nil
}

// UpdateReplicaSetInput is an existing ReplicaSet with new annotations or
// minReadySeconds (upstream's revision sync).
type UpdateReplicaSetInput struct {
	ReplicaSet *appsv1.ReplicaSet `json:"replicaSet"`
}

// UpdateReplicaSet writes the annotations and minReadySeconds of the given
// ReplicaSet onto the live one (fetched fresh, so it is retry-safe).
func (a *Activities) UpdateReplicaSet(ctx context.Context, in UpdateReplicaSetInput) (*appsv1.ReplicaSet, error) {
	want := in.ReplicaSet
	if want == nil {
		return nil, invalidInput("updateReplicaSet: replicaSet is required")
	}
	rss := a.Kube.AppsV1().ReplicaSets(want.Namespace)
	rs, err := rss.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, stalePlan("replicaset %s/%s is gone", want.Namespace, want.Name)
		}
		return nil, fmt.Errorf("get replicaset %s/%s: %w", want.Namespace, want.Name, err)
	}
	if want.UID != "" && rs.UID != want.UID {
		return nil, stalePlan("replicaset %s/%s was replaced", want.Namespace, want.Name)
	}
	rs.Annotations = want.Annotations
	rs.Spec.MinReadySeconds = want.Spec.MinReadySeconds
	got, err := rss.Update(ctx, rs, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("update replicaset %s/%s: %w", want.Namespace, want.Name, err)
	}
	return slim(got), nil
}

// DeleteReplicaSetInput names an old ReplicaSet removed by history cleanup.
type DeleteReplicaSetInput struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
}

// DeleteReplicaSet deletes the ReplicaSet if it is still the one decided on
// (UID precondition). NotFound is success.
func (a *Activities) DeleteReplicaSet(ctx context.Context, in DeleteReplicaSetInput) error {
	opts := metav1.DeleteOptions{}
	if in.UID != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &in.UID}
	}
	err := a.Kube.AppsV1().ReplicaSets(in.Namespace).Delete(ctx, in.Name, opts)
	switch {
	case err == nil || apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return stalePlan("replicaset %s/%s was replaced", in.Namespace, in.Name)
	default:
		return fmt.Errorf("delete replicaset %s/%s: %w", in.Namespace, in.Name, err)
	}
}

func stalePlan(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrStalePlan, nil)
}
