package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
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
	// Digest summarises everything a rollout decision depends on; a wait
	// returns only once the cluster's digest differs from the one it got.
	Digest string `json:"digest"`
	// ObservedAt, set only by QuickWait, is when the state returned was
	// first seen: the rollout's next sync stamps its progress with it, as
	// upstream's controller would have when the change reached it.
	ObservedAt *time.Time `json:"observedAt,omitempty"`
}

// ServiceRef names one service's ReplicaSets (by ServiceLabel) and pods
// (by the Deployment's selector).
type ServiceRef struct {
	Namespace   string `json:"namespace"`
	Service     string `json:"service"`
	PodSelector string `json:"podSelector"`
	// Pods: also list and watch the pods (Recreate waits for old ones to go;
	// rolling updates decide on ReplicaSets alone).
	Pods bool `json:"pods,omitempty"`
}

func (r ServiceRef) selector() string { return ServiceLabel + "=" + r.Service }

// ReadRolloutState lists the service's ReplicaSets (sorted by name) and
// counts their active pods.
func (a *Activities) ReadRolloutState(ctx context.Context, ref ServiceRef) (*RolloutState, error) {
	snap, err := a.snapshot(ctx, ref)
	if err != nil {
		return nil, err
	}
	return snap.state(), nil
}

// snapshot is the live objects behind a RolloutState, kept current by a
// watch while waiting.
type snapshot struct {
	replicaSets map[string]*appsv1.ReplicaSet
	pods        map[string]*corev1.Pod
	rsVersion   string
	podVersion  string
}

// nothingRuns is the state of a service of which nothing runs, as
// ReadRolloutState reads it (same digest) where its namespace is missing.
func nothingRuns() *RolloutState {
	return (&snapshot{replicaSets: map[string]*appsv1.ReplicaSet{}, pods: map[string]*corev1.Pod{}}).state()
}

func (a *Activities) snapshot(ctx context.Context, ref ServiceRef) (*snapshot, error) {
	rsList, err := a.Kube.AppsV1().ReplicaSets(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: ref.selector()})
	if err != nil {
		return nil, fmt.Errorf("list replicasets of %s/%s: %w", ref.Namespace, ref.Service, err)
	}
	snap := &snapshot{
		replicaSets: map[string]*appsv1.ReplicaSet{},
		pods:        map[string]*corev1.Pod{},
		rsVersion:   rsList.ResourceVersion,
	}
	for i := range rsList.Items {
		snap.replicaSets[rsList.Items[i].Name] = slim(&rsList.Items[i])
	}
	if !ref.Pods {
		return snap, nil
	}
	podList, err := a.Kube.CoreV1().Pods(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: ref.PodSelector})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s/%s: %w", ref.Namespace, ref.Service, err)
	}
	snap.podVersion = podList.ResourceVersion
	for i := range podList.Items {
		snap.pods[podList.Items[i].Name] = &podList.Items[i]
	}
	return snap, nil
}

func (s *snapshot) state() *RolloutState {
	st := &RolloutState{}
	for _, rs := range s.replicaSets {
		st.ReplicaSets = append(st.ReplicaSets, rs)
	}
	sort.Slice(st.ReplicaSets, func(i, j int) bool { return st.ReplicaSets[i].Name < st.ReplicaSets[j].Name })
	for _, p := range s.pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if owner := metav1.GetControllerOf(p); owner != nil {
			if st.ActivePods == nil {
				st.ActivePods = map[types.UID]int32{}
			}
			st.ActivePods[owner.UID]++
		}
	}
	st.Digest = digest(st)
	return st
}

// digest hashes the fields rollout decisions read: per ReplicaSet its
// identity, template hash, spec and annotations, status counts and
// conditions; and the active pods per owner.
func digest(st *RolloutState) string {
	b, _ := json.Marshal(factsOf(st)) // maps marshal with sorted keys
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// rsFacts are the fields of one ReplicaSet a rollout decision reads.
type rsFacts struct {
	Name, UID, Hash           string
	Replicas, MinReadySeconds int32
	Annotations               map[string]string
	Status                    [3]int32 // replicas, ready, available
	Terminating               int32
	Conditions                []string
	Deleting                  bool
}

// stateFacts are the fields of a RolloutState a rollout decision reads.
type stateFacts struct {
	RS   []rsFacts
	Pods map[types.UID]int32
}

func factsOf(st *RolloutState) stateFacts {
	facts := stateFacts{Pods: st.ActivePods}
	for _, rs := range st.ReplicaSets {
		f := rsFacts{
			Name: rs.Name, UID: string(rs.UID), Hash: rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey],
			MinReadySeconds: rs.Spec.MinReadySeconds, Annotations: rs.Annotations,
			Status:   [3]int32{rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas},
			Deleting: rs.DeletionTimestamp != nil,
		}
		if rs.Spec.Replicas != nil {
			f.Replicas = *rs.Spec.Replicas
		}
		if rs.Status.TerminatingReplicas != nil {
			f.Terminating = *rs.Status.TerminatingReplicas
		}
		for _, c := range rs.Status.Conditions {
			f.Conditions = append(f.Conditions, string(c.Type)+"="+string(c.Status)+"/"+c.Reason)
		}
		facts.RS = append(facts.RS, f)
	}
	return facts
}

// WaitForChangeInput says what the workflow last saw and how long to wait.
type WaitForChangeInput struct {
	ServiceRef
	// Digest of the state the workflow decided on.
	Digest string `json:"digest"`
	// Timeout ends the wait with the current state even if nothing changed
	// (the workflow's progress-deadline re-check).
	Timeout time.Duration `json:"timeout"`
	// ResourceVersions are those of the ReplicaSets the workflow decided on,
	// by name. With them a RollingUpdate's wait runs on the worker's shared
	// informer cache (no request of its own) once the cache has caught up
	// with them; without them, or with no cache, it lists and watches.
	ResourceVersions map[string]string `json:"resourceVersions,omitempty"`

	// Seen and folds are QuickWait's (quick_wait.go): pods created but
	// not yet ready do not end its wait.
	Seen  *RolloutState `json:"seen,omitempty"`
	folds *folds
}

// ReplicaSetCache is the worker's shared ReplicaSet informer (see
// internal/observe): a service's cached ReplicaSets, and a channel closed at
// the next change in their namespace; ok is false when it is not in sync.
type ReplicaSetCache interface {
	ReplicaSetsOf(namespace, service string) (rs []*appsv1.ReplicaSet, changed <-chan struct{}, ok bool)
}

// WaitForChange returns the service's state as soon as it differs (by
// digest) from what the workflow last saw, or when Timeout passes. It lists,
// then watches ReplicaSets (and pods, for Recreate) from there, so a change made
// between the workflow's read and this wait is not missed, and events that
// change nothing a decision reads (such as the echo of our own writes) do not
// wake the workflow. It heartbeats while it waits; a retry starts afresh.
func (a *Activities) WaitForChange(ctx context.Context, in WaitForChangeInput) (*RolloutState, error) {
	if in.Timeout <= 0 {
		return nil, invalidInput("waitForChange: timeout must be positive")
	}
	if c, ok := a.Observer.(ReplicaSetCache); ok && !in.Pods && len(in.ResourceVersions) > 0 {
		if st, served, err := a.waitOnCache(ctx, c, in); served {
			return st, err
		}
	}
	snap, err := a.snapshot(ctx, in.ServiceRef)
	if err != nil {
		return nil, err
	}
	if st := snap.state(); in.wakes(st) {
		return st, nil
	}
	ctx, cancel := context.WithTimeout(ctx, in.Timeout)
	defer cancel()
	rsWatch, err := a.Kube.AppsV1().ReplicaSets(in.Namespace).Watch(ctx,
		metav1.ListOptions{LabelSelector: in.selector(), ResourceVersion: snap.rsVersion})
	if err != nil {
		return nil, fmt.Errorf("watch replicasets of %s/%s: %w", in.Namespace, in.Service, err)
	}
	defer rsWatch.Stop()
	podEvents := make(<-chan watch.Event)
	if in.Pods {
		podWatch, err := a.Kube.CoreV1().Pods(in.Namespace).Watch(ctx,
			metav1.ListOptions{LabelSelector: in.PodSelector, ResourceVersion: snap.podVersion})
		if err != nil {
			return nil, fmt.Errorf("watch pods of %s/%s: %w", in.Namespace, in.Service, err)
		}
		defer podWatch.Stop()
		podEvents = podWatch.ResultChan()
	}

	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// The timeout is the normal end of a quiet wait.
			return snap.state(), nil
		case <-tick.C:
			activity.RecordHeartbeat(ctx)
		case ev, ok := <-rsWatch.ResultChan():
			if !ok || ev.Type == watch.Error {
				return a.ReadRolloutState(context.WithoutCancel(ctx), in.ServiceRef)
			}
			if rs, isRS := ev.Object.(*appsv1.ReplicaSet); isRS {
				if ev.Type == watch.Deleted {
					delete(snap.replicaSets, rs.Name)
				} else {
					snap.replicaSets[rs.Name] = slim(rs)
				}
			}
		case ev, ok := <-podEvents:
			if !ok || ev.Type == watch.Error {
				return a.ReadRolloutState(context.WithoutCancel(ctx), in.ServiceRef)
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod {
				if ev.Type == watch.Deleted {
					delete(snap.pods, p.Name)
				} else {
					snap.pods[p.Name] = p
				}
			}
		}
		if st := snap.state(); in.wakes(st) {
			return st, nil
		}
	}
}

// waitOnCache is WaitForChange on the shared informer cache: it returns
// the service's state once the cache has caught up with what the workflow
// saw and differs from it. served is false when the cache cannot serve the
// wait (not in sync, resource versions it cannot compare): the caller
// lists and watches instead. At the timeout it reads the API server once,
// so a quiet wait never answers from a cache that lags behind.
func (a *Activities) waitOnCache(parent context.Context, c ReplicaSetCache, in WaitForChangeInput) (st *RolloutState, served bool, err error) {
	ctx, cancel := context.WithTimeout(parent, in.Timeout)
	defer cancel()
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for {
		list, changed, ok := c.ReplicaSetsOf(in.Namespace, in.Service)
		if !ok {
			return nil, false, nil
		}
		caughtUp, comparable := caughtUpWith(list, in.ResourceVersions)
		if !comparable {
			return nil, false, nil
		}
		if caughtUp {
			snap := &snapshot{replicaSets: map[string]*appsv1.ReplicaSet{}}
			for _, rs := range list {
				snap.replicaSets[rs.Name] = slim(rs)
			}
			if st := snap.state(); in.wakes(st) {
				return st, true, nil
			}
		}
		select {
		case <-changed:
		case <-tick.C:
			if ctx.Err() == nil {
				activity.RecordHeartbeat(parent)
			}
		case <-ctx.Done():
			if parent.Err() != nil {
				return nil, true, parent.Err()
			}
			st, err := a.ReadRolloutState(parent, in.ServiceRef) // the timeout
			return st, true, err
		}
	}
}

// caughtUpWith reports whether the cached ReplicaSets are at least at the
// resource versions the workflow saw (each one it saw is cached, at that
// version or later). Resource versions are compared as the numbers etcd
// gives; comparable is false for any other form.
func caughtUpWith(list []*appsv1.ReplicaSet, seen map[string]string) (caughtUp, comparable bool) {
	cached := make(map[string]string, len(list))
	for _, rs := range list {
		cached[rs.Name] = rs.ResourceVersion
	}
	caughtUp = true
	for name, rv := range seen {
		want, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return false, false
		}
		got, ok := cached[name]
		if !ok {
			caughtUp = false
			continue
		}
		have, err := strconv.ParseUint(got, 10, 64)
		if err != nil {
			return false, false
		}
		if have < want {
			caughtUp = false
		}
	}
	return caughtUp, true
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
// ScaleResult is what ScaleReplicaSet did.
type ScaleResult struct {
	ReplicaSet string `json:"replicaSet"`
	From       int32  `json:"from"`
	To         int32  `json:"to"`
	// Wrote is false when the ReplicaSet was found at the target already
	// (a retry after the write had succeeded).
	Wrote bool `json:"wrote"`
}

func (a *Activities) ScaleReplicaSet(ctx context.Context, in ScaleInput) (*ScaleResult, error) {
	if err := a.allowNamespace(ctx, in.Namespace); err != nil {
		return nil, err
	}
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
	res := &ScaleResult{ReplicaSet: rs.Name, From: in.Op.From, To: in.Op.To}
	if current == in.Op.To && !rollout.ReplicasAnnotationsNeedUpdate(rs, in.Op.DesiredReplicas, in.Op.MaxReplicas) {
		return res, nil // done already (a retry after a lost response)
	}
	if current != in.Op.From && current != in.Op.To {
		return nil, stalePlan("replicaset %s/%s has %d replicas, the decision assumed %d", in.Namespace, rs.Name, current, in.Op.From)
	}
	// Logged before the write: a worker killed between the write and its
	// answer leaves the write in no history, and only this line says who
	// made it (the chaos suite's "nothing written unexplained").
	activity.GetLogger(ctx).Info("scaling ReplicaSet", "namespace", in.Namespace, "name", rs.Name, "from", current, "to", in.Op.To)
	if _, err := rss.Update(ctx, want, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return nil, fmt.Errorf("scale replicaset %s/%s to %d: %w", in.Namespace, rs.Name, in.Op.To, err)
	}
	activity.GetLogger(ctx).Info(in.Op.Reason, "namespace", in.Namespace)
	res.Wrote = true
	return res, nil
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
	if err := a.allowNamespace(ctx, want.Namespace); err != nil {
		return nil, err
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
	// Logged before the write, as a scale is (ScaleReplicaSet).
	activity.GetLogger(ctx).Info("updating ReplicaSet", "namespace", want.Namespace, "name", rs.Name)
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
	if err := a.allowNamespace(ctx, in.Namespace); err != nil {
		return err
	}
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
