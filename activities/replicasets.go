package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// heartbeatEvery is how often waiting activities report progress; their
// HeartbeatTimeout (set by the workflow) must be a few times larger.
const heartbeatEvery = 5 * time.Second

// EnsureNamespaceInput names a namespace to create if missing.
type EnsureNamespaceInput struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// EnsureNamespace creates the namespace if it does not exist and waits until
// pods can be created in it (its default ServiceAccount exists).
func (a *Activities) EnsureNamespace(ctx context.Context, in EnsureNamespaceInput) error {
	if in.Name == "" {
		return invalidInput("namespace: name is empty")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in.Name, Labels: in.Labels}}
	if _, err := a.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", in.Name, err)
	}
	sas := a.Kube.CoreV1().ServiceAccounts(in.Name)
	sel := fields.OneTermEqualSelector("metadata.name", "default").String()
	for {
		list, err := sas.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return fmt.Errorf("list serviceaccounts in %s: %w", in.Name, err)
		}
		if len(list.Items) > 0 {
			return nil
		}
		w, err := sas.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return fmt.Errorf("watch serviceaccounts in %s: %w", in.Name, err)
		}
		err = waitFor(ctx, w, func(watch.Event) bool { return true })
		w.Stop()
		if err != nil {
			return err
		}
	}
}

// FieldManager is deployflow's field manager on every write.
const FieldManager = "deployflow"

// EnsureReplicaSetInput is a ReplicaSet to create if it does not exist.
type EnsureReplicaSetInput struct {
	ReplicaSet *appsv1.ReplicaSet `json:"replicaSet"`
}

// EnsureReplicaSet creates the ReplicaSet, or returns the existing one of
// that name when it holds the same pod template (a retry, or a workflow
// replayed after a worker restart). A same-named ReplicaSet with another
// template is a non-retryable ReplicaSetConflict.
func (a *Activities) EnsureReplicaSet(ctx context.Context, in EnsureReplicaSetInput) (*appsv1.ReplicaSet, error) {
	want := in.ReplicaSet
	if want == nil || want.Name == "" || want.Namespace == "" {
		return nil, invalidInput("replicaSet: name and namespace are required")
	}
	rss := a.Kube.AppsV1().ReplicaSets(want.Namespace)
	got, err := rss.Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
	if err == nil {
		activity.GetLogger(ctx).Info("created ReplicaSet", "namespace", want.Namespace, "name", want.Name)
		return slim(got), nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create replicaset %s/%s: %w", want.Namespace, want.Name, err)
	}
	got, err = rss.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get replicaset %s/%s: %w", want.Namespace, want.Name, err)
	}
	const hashLabel = appsv1.DefaultDeploymentUniqueLabelKey
	if got.Labels[hashLabel] != want.Labels[hashLabel] {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("replicaset %s/%s exists with pod-template-hash %q, want %q: delete it or rename the service",
				want.Namespace, want.Name, got.Labels[hashLabel], want.Labels[hashLabel]),
			ErrReplicaSetConflict, nil)
	}
	return slim(got), nil
}

// waitFor consumes w until done returns true, the watch closes, or ctx ends.
// While it waits it heartbeats, so a dead worker is noticed within the
// activity's HeartbeatTimeout rather than its StartToCloseTimeout.
func waitFor(ctx context.Context, w watch.Interface, done func(watch.Event) bool) error {
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx)
			}
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if ev.Type == watch.Error {
				return nil // e.g. 410 Gone: the caller re-lists
			}
			if done(ev) {
				return nil
			}
		}
	}
}

// slim drops managedFields, which only bloat workflow history.
func slim(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	rs = rs.DeepCopy()
	rs.ManagedFields = nil
	return rs
}
