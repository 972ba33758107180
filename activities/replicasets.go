package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/crds"
)

// heartbeatEvery is how often waiting activities report progress; their
// HeartbeatTimeout (set by the workflow) must be a few times larger.
const heartbeatEvery = 5 * time.Second

// EnsureNamespaceInput names a namespace to create if missing.
type EnsureNamespaceInput struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// Rollout: a RolloutWorkflow asks, a child of lease ParentLease's
	// workflow ("" for a standalone rollout). Set by workflow code from
	// what Temporal says of the run, never from its input: a rollout acts
	// in a lease's namespace only as that lease's child (issue 20.5).
	Rollout     bool   `json:"rollout,omitempty"`
	ParentLease string `json:"parentLease,omitempty"`
}

// EnsureNamespace makes sure the namespace exists, is deployflow's to write
// in, and can hold pods (its default ServiceAccount exists). It creates a
// lease namespace (named manifest.Namespace(lease), labelled with that
// lease), owned by the lease record so Kubernetes collects it with the
// lease, or a namespace listed in --rollout-namespaces; any other namespace
// must already exist and be labelled as deployflow's. Everything else is a
// non-retryable NamespaceNotAllowed, before any write. A lease namespace
// enforces the operator's profile (applyLeaseProfile).
func (a *Activities) EnsureNamespace(ctx context.Context, in EnsureNamespaceInput) error {
	_, err := a.ensureNamespace(ctx, in)
	return err
}

// ensureNamespace is EnsureNamespace, returning the namespace as it left
// it (ApplyDeploy takes its owner from it rather than reading it again).
func (a *Activities) ensureNamespace(ctx context.Context, in EnsureNamespaceInput) (*corev1.Namespace, error) {
	if in.Name == "" {
		return nil, invalidInput("namespace: name is empty")
	}
	lease, isLease := leaseNamespace(in.Name, in.Labels)
	nss := a.Kube.CoreV1().Namespaces()
	ns, err := nss.Get(ctx, in.Name, metav1.GetOptions{})
	existed := err == nil
	if apierrors.IsNotFound(err) {
		if !isLease && !a.listed(in.Name) {
			return nil, notAllowed(in.Name, "does not exist and is not listed in --rollout-namespaces")
		}
		labels := map[string]string{manifest.ManagedByLabel: manifest.ManagedBy}
		for k, v := range in.Labels {
			labels[k] = v
		}
		if isLease {
			labels[PodSecurityEnforceLabel] = a.profile().PodSecurity
		}
		want := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in.Name, Labels: labels}}
		if isLease {
			if want.OwnerReferences, err = a.leaseOwnerRefs(ctx, lease); err != nil {
				return nil, err
			}
		}
		ns, err = nss.Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) {
			ns, err = nss.Get(ctx, in.Name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ensure namespace %s: %w", in.Name, err)
	}
	if !ManagedNamespace(ns) && !a.listed(in.Name) {
		return nil, notAllowed(in.Name, "exists and is not managed by deployflow")
	}
	if owner := ns.Labels[manifest.LeaseLabel]; in.Rollout && owner != "" && in.ParentLease != owner {
		return nil, notAllowed(in.Name, fmt.Sprintf("is lease %s's: only that lease's own workflow rolls out there (deployflow deploy); a standalone rollout acts in a namespace listed in --rollout-namespaces", owner))
	}
	if isLease && !a.LeasesElsewhere && len(ownedBy(ns.OwnerReferences, crds.KindLease)) == 0 {
		// A lease namespace created before lease records owned them.
		refs, err := a.leaseOwnerRefs(ctx, lease)
		if err != nil {
			return nil, err
		}
		ns.OwnerReferences = append(ns.OwnerReferences, refs...)
		if ns, err = nss.Update(ctx, ns, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return nil, fmt.Errorf("own namespace %s by lease %s: %w", in.Name, lease, err)
		}
	}
	if existed && in.Rollout && in.ParentLease != "" && ns.Labels[manifest.LeaseLabel] == in.ParentLease && in.Name == manifest.Namespace(in.ParentLease) {
		// The lease's own rollout, after its deploy's chain (ApplyDeploy)
		// ensured this namespace, its profile and its ServiceAccount: it
		// exists and is the lease's; nothing to write or wait for (the
		// ServiceAccount's list: one request per deploy fewer, issue 22).
		return ns, nil
	}
	if isLease {
		if err := a.applyLeaseProfile(ctx, ns); err != nil {
			return nil, err
		}
	}
	sas := a.Kube.CoreV1().ServiceAccounts(in.Name)
	sel := fields.OneTermEqualSelector("metadata.name", "default").String()
	for {
		list, err := sas.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("list serviceaccounts in %s: %w", in.Name, err)
		}
		if len(list.Items) > 0 {
			if isLease {
				return ns, a.keepTokenUnmounted(ctx, &list.Items[0])
			}
			return ns, nil
		}
		w, err := sas.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return nil, fmt.Errorf("watch serviceaccounts in %s: %w", in.Name, err)
		}
		err = waitFor(ctx, w, func(watch.Event) bool { return true })
		w.Stop()
		if err != nil {
			return nil, err
		}
	}
}

// leaseOwnerRefs is the controller owner reference to a lease's record.
func (a *Activities) leaseOwnerRefs(ctx context.Context, lease string) ([]metav1.OwnerReference, error) {
	if a.LeasesElsewhere {
		return nil, nil
	}
	l, err := a.Leases.Get(ctx, lease)
	if err != nil {
		return nil, fmt.Errorf("read lease %s to own its namespace: %w", lease, err)
	}
	if l.UID == "" {
		return nil, nil // a store without object UIDs (tests' in-memory store)
	}
	return []metav1.OwnerReference{{
		APIVersion: crds.APIVersion, Kind: crds.KindLease, Name: l.ID, UID: types.UID(l.UID), Controller: ptr.To(true),
	}}, nil
}

// namespaceOwnerRefs is the owner reference objects in namespace ns carry:
// the lease record that owns the namespace (read fresh, never cached: a
// lease recreated under the same name has another UID), or none outside
// lease namespaces. It also refuses namespaces deployflow may not write in.
func (a *Activities) namespaceOwnerRefs(ctx context.Context, ns string) ([]metav1.OwnerReference, error) {
	got, err := a.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && a.listed(ns):
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, notAllowed(ns, "does not exist and is not listed in --rollout-namespaces")
	case err != nil:
		return nil, fmt.Errorf("get namespace %s: %w", ns, err)
	case !ManagedNamespace(got) && !a.listed(ns):
		return nil, notAllowed(ns, "is not managed by deployflow")
	}
	return ownedBy(got.OwnerReferences, crds.KindLease), nil
}

func ownedBy(refs []metav1.OwnerReference, kind string) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, r := range refs {
		if r.Kind == kind && r.APIVersion == crds.APIVersion {
			out = append(out, r)
		}
	}
	return out
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
	owners, err := a.namespaceOwnerRefs(ctx, want.Namespace)
	if err != nil {
		return nil, err
	}
	want = want.DeepCopy()
	want.Labels = replicaSetLabels(want.Labels)
	if len(owners) > 0 {
		want.OwnerReferences = owners
	}
	rss := a.Kube.AppsV1().ReplicaSets(want.Namespace)
	// Logged before the write: a worker killed while the request is in
	// flight leaves a ReplicaSet the history never records (its local
	// activity's result is lost with it; the retried task finds it
	// created), and this line is then its one trace.
	activity.GetLogger(ctx).Info("creating ReplicaSet", "namespace", want.Namespace, "name", want.Name)
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

// replicaSetLabels are the labels a ReplicaSet of deployflow's carries:
// deployflow's own and pod-template-hash, not the pods' app or user labels,
// so no user's Deployment or ReplicaSet selector (app: web) matches and
// adopts it by accident. In a lease namespace it also has a controller
// owner reference (the lease record), which no controller adopts past.
func replicaSetLabels(template map[string]string) map[string]string {
	out := map[string]string{manifest.ManagedByLabel: manifest.ManagedBy}
	for k, v := range template {
		if strings.HasPrefix(k, "deployflow.dev/") || k == appsv1.DefaultDeploymentUniqueLabelKey {
			out[k] = v
		}
	}
	return out
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
