package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/rollout"
	"github.com/deployflow/deployflow/k8s/statefulset"
)

// Where a stateful service's rollout touches the cluster (issue 39.2):
// its StatefulSet, applied with the partition holding every pod at the
// running revision; the state a step decides on (k8s/statefulset.Next);
// the partition a step writes; and the pods a return to the previous
// revision deletes itself. Each is safe to retry.

// TemplateHashAnnotation records on a StatefulSet the hash of the pod
// template deployflow applied (rollout.ComputeHash): the API server
// defaults a template's fields, so the live template is compared with the
// desired one by this, not field by field.
const TemplateHashAnnotation = "deployflow.dev/template-hash"

// ApplyStatefulSetInput is a stateful service's StatefulSet as its
// manifest renders it (manifest.StatefulSet).
type ApplyStatefulSetInput struct {
	StatefulSet appsv1.StatefulSet `json:"statefulSet"`
}

// StatefulSetState is what a rollout step reads of a StatefulSet.
type StatefulSetState struct {
	statefulset.Observed
	// Stale: the StatefulSet controller has not yet observed the spec's
	// generation, so its update revision is not the spec's: read again.
	Stale bool `json:"stale,omitempty"`
	// ReplacedTemplateHash is set by ApplyStatefulSet when it wrote a new
	// template: the hash the one it replaced was applied with, which a
	// return writes back with that template.
	ReplacedTemplateHash string `json:"replacedTemplateHash,omitempty"`
	// Claims are the StatefulSet's PersistentVolumeClaims by name, each
	// with its volume: what no step may lose. A rollout's history holds
	// only their count (ClaimCount): a thousand claims by name in every
	// read would be most of it.
	Claims     map[string]string `json:"-"`
	ClaimCount int               `json:"claimCount,omitempty"`
}

// ApplyStatefulSet creates in's StatefulSet, or brings the live one to
// it. A new pod template is written with the partition at the replicas,
// so that no pod is replaced until the rollout lowers it; an unchanged
// template keeps the live partition (a retry, or a scale, does not undo
// the rollout's steps). A StatefulSet that is not the lease's, or whose
// claim templates differ (they are fixed once created), is a
// non-retryable error.
func (a *Activities) ApplyStatefulSet(ctx context.Context, in ApplyStatefulSetInput) (*StatefulSetState, error) {
	want := in.StatefulSet.DeepCopy()
	if want.Name == "" || want.Namespace == "" || want.Spec.Replicas == nil {
		return nil, invalidInput("statefulset: name, namespace and replicas are required")
	}
	// The pod policy first, as for a Deployment's template (issue 20.5).
	if err := a.statefulSetPodPolicy(want); err != nil {
		return nil, err
	}
	hash := rollout.ComputeHash(&want.Spec.Template, nil)
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	want.Annotations[TemplateHashAnnotation] = hash
	sets := a.Kube.AppsV1().StatefulSets(want.Namespace)
	live, err := sets.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		want.Spec.UpdateStrategy = holdAt(*want.Spec.Replicas)
		_, err = sets.Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return nil, fmt.Errorf("create statefulset %s/%s: %w", want.Namespace, want.Name, err)
			}
			return a.ReadStatefulSet(ctx, StatefulSetRef{Namespace: want.Namespace, Name: want.Name})
		}
		live, err = sets.Get(ctx, want.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("get statefulset %s/%s: %w", want.Namespace, want.Name, err)
	}
	if live.Labels[manifest.ServiceLabel] != want.Labels[manifest.ServiceLabel] || live.Labels[manifest.LeaseLabel] != want.Labels[manifest.LeaseLabel] {
		return nil, notAllowed(want.Namespace, fmt.Sprintf("has a StatefulSet %s that is not service %s's", want.Name, want.Labels[manifest.ServiceLabel]))
	}
	if !sameClaims(live.Spec.VolumeClaimTemplates, want.Spec.VolumeClaimTemplates) {
		return nil, invalidInput("statefulset %s/%s: its claim templates are fixed once created, and the manifest's differ: deploy the new volumes under a new service name", want.Namespace, want.Name)
	}
	if pm := want.Spec.PodManagementPolicy; pm != "" && live.Spec.PodManagementPolicy != pm {
		return nil, invalidInput("statefulset %s/%s: its pod management policy is fixed once created (%s), and the manifest's is %s: deploy it under a new service name", want.Namespace, want.Name, live.Spec.PodManagementPolicy, pm)
	}
	next := live.DeepCopy()
	if grow := *want.Spec.Replicas - *live.Spec.Replicas; grow > 0 && live.Status.UpdateRevision != live.Status.CurrentRevision {
		// A rollout is under way: the new ordinals would be at or above
		// its partition, made at the update revision outside its steps (a
		// canary past its share). The partition rises with them, so they
		// are made at the current revision.
		if ru := next.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			p := *ru.Partition + grow
			ru.Partition = &p
		}
	}
	next.Spec.Replicas = want.Spec.Replicas
	next.Spec.MinReadySeconds = want.Spec.MinReadySeconds
	next.Spec.RevisionHistoryLimit = want.Spec.RevisionHistoryLimit
	next.Spec.PersistentVolumeClaimRetentionPolicy = want.Spec.PersistentVolumeClaimRetentionPolicy
	if live.Annotations[TemplateHashAnnotation] != hash {
		next.Spec.Template = want.Spec.Template
		next.Spec.UpdateStrategy = holdAt(*want.Spec.Replicas)
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[TemplateHashAnnotation] = hash
	}
	if !equality.Semantic.DeepEqual(live.Spec, next.Spec) || live.Annotations[TemplateHashAnnotation] != hash {
		updated, err := sets.Update(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil {
			return nil, fmt.Errorf("update statefulset %s/%s: %w", want.Namespace, want.Name, err)
		}
		a.awaitObserved(ctx, updated)
	}
	st, err := a.ReadStatefulSet(ctx, StatefulSetRef{Namespace: want.Namespace, Name: want.Name})
	if err == nil && live.Annotations[TemplateHashAnnotation] != hash {
		st.ReplacedTemplateHash = live.Annotations[TemplateHashAnnotation]
	}
	return st, err
}

// holdAt is a RollingUpdate whose partition holds every ordinal below p.
func holdAt(p int32) appsv1.StatefulSetUpdateStrategy {
	return appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &p}}
}

// sameClaims reports whether two lists of claim templates ask for the same
// claims: names, classes and sizes.
func sameClaims(a, b []corev1.PersistentVolumeClaim) bool {
	key := func(l []corev1.PersistentVolumeClaim) string {
		var out []string
		for _, c := range l {
			class := ""
			if c.Spec.StorageClassName != nil {
				class = *c.Spec.StorageClassName
			}
			size := c.Spec.Resources.Requests[corev1.ResourceStorage]
			out = append(out, c.Name+" "+class+" "+size.String())
		}
		slices.Sort(out) // the manifest's order of volumes is not the claims'
		return strings.Join(out, ";")
	}
	return key(a) == key(b)
}

// StatefulSetRef names a StatefulSet.
type StatefulSetRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// ReadStatefulSet reads what a rollout step decides on: the StatefulSet's
// replicas, partition and revisions, its pods (ordinal, revision, Ready,
// available for minReadySeconds, terminating) and its claims.
func (a *Activities) ReadStatefulSet(ctx context.Context, ref StatefulSetRef) (*StatefulSetState, error) {
	sts, pods, err := a.getStatefulSet(ctx, ref)
	if err != nil {
		return nil, err
	}
	st := statefulSetState(sts, pods.Items, time.Now())
	return st, a.readClaims(ctx, sts, st)
}

// getStatefulSet gets a StatefulSet and lists its pods.
func (a *Activities) getStatefulSet(ctx context.Context, ref StatefulSetRef) (*appsv1.StatefulSet, *corev1.PodList, error) {
	sts, err := a.Kube.AppsV1().StatefulSets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("get statefulset %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		return nil, nil, invalidInput("statefulset %s/%s: selector: %v", ref.Namespace, ref.Name, err)
	}
	pods, err := a.Kube.CoreV1().Pods(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, nil, fmt.Errorf("list pods of statefulset %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return sts, pods, nil
}

// statefulSetState is what a step decides on, from sts and its pods (the
// claims apart), at now.
func statefulSetState(sts *appsv1.StatefulSet, pods []corev1.Pod, now time.Time) *StatefulSetState {
	st := &StatefulSetState{
		Observed: statefulset.Observed{Name: sts.Name, Replicas: *sts.Spec.Replicas, Partition: *sts.Spec.Replicas,
			UpdateRevision: sts.Status.UpdateRevision, CurrentRevision: sts.Status.CurrentRevision},
		Stale: sts.Status.ObservedGeneration < sts.Generation,
	}
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		st.Partition = *ru.Partition
	}
	for i := range pods {
		p := &pods[i]
		ord, ok := ordinalOf(sts, p)
		if !ok {
			continue
		}
		ready, since := podReady(p)
		st.Pods = append(st.Pods, statefulset.Pod{Ordinal: ord, Revision: p.Labels[appsv1.ControllerRevisionHashLabelKey],
			Ready: ready, Available: ready && !since.Add(time.Duration(sts.Spec.MinReadySeconds)*time.Second).After(now),
			Terminating: p.DeletionTimestamp != nil})
	}
	slices.SortFunc(st.Pods, func(x, y statefulset.Pod) int { return int(x.Ordinal - y.Ordinal) })
	return st
}

// nextAvailable is when the next of sts's Ready pods turns available
// (Ready for minReadySeconds) after now: no event says so. Zero if none.
func nextAvailable(sts *appsv1.StatefulSet, pods map[string]*corev1.Pod, now time.Time) time.Time {
	var next time.Time
	for _, p := range pods {
		if ready, since := podReady(p); ready {
			if at := since.Add(time.Duration(sts.Spec.MinReadySeconds) * time.Second); at.After(now) && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
	}
	return next
}

// readClaims adds sts's claims to st.
func (a *Activities) readClaims(ctx context.Context, sts *appsv1.StatefulSet, st *StatefulSetState) error {
	claims, err := a.Kube.CoreV1().PersistentVolumeClaims(sts.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{manifest.ServiceLabel: sts.Labels[manifest.ServiceLabel]}).String()})
	if err != nil {
		return fmt.Errorf("list claims of statefulset %s/%s: %w", sts.Namespace, sts.Name, err)
	}
	for _, c := range claims.Items {
		if st.Claims == nil {
			st.Claims = map[string]string{}
		}
		st.Claims[c.Name] = c.Spec.VolumeName
	}
	st.ClaimCount = len(st.Claims)
	return nil
}

// ordinalOf is pod p's ordinal in StatefulSet sts (its name is
// <sts>-<ordinal>), if sts owns it.
func ordinalOf(sts *appsv1.StatefulSet, p *corev1.Pod) (int32, bool) {
	owned := false
	for _, o := range p.OwnerReferences {
		owned = owned || (o.UID == sts.UID && o.Controller != nil && *o.Controller)
	}
	suffix, found := strings.CutPrefix(p.Name, sts.Name+"-")
	if !owned || !found {
		return 0, false
	}
	n, err := strconv.ParseInt(suffix, 10, 32)
	return int32(n), err == nil && n >= 0
}

// podReady is whether p is Ready, and since when.
func podReady(p *corev1.Pod) (bool, time.Time) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// SetPartitionInput is the partition a rollout step writes.
type SetPartitionInput struct {
	StatefulSetRef
	Partition int32 `json:"partition"`
}

// SetPartition writes a StatefulSet's partition (the StatefulSet
// controller then replaces the ordinals at or above it that do not run its
// update revision, highest first). Writing the same partition again
// changes nothing.
func (a *Activities) SetPartition(ctx context.Context, in SetPartitionInput) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"updateStrategy": map[string]any{
		"type": appsv1.RollingUpdateStatefulSetStrategyType, "rollingUpdate": map[string]any{"partition": in.Partition}}}})
	if err != nil {
		return err
	}
	sts, err := a.Kube.AppsV1().StatefulSets(in.Namespace).Patch(ctx, in.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("set the partition of statefulset %s/%s to %d: %w", in.Namespace, in.Name, in.Partition, err)
	}
	a.awaitObserved(ctx, sts)
	return nil
}

// observeWait bounds awaitObserved.
const observeWait = 2 * time.Second

// awaitObserved waits, at most observeWait, until the StatefulSet
// controller has observed sts's generation (a watch of sts from the write
// that made it): the step's read that follows then decides on the status
// of what was written, not the one before it (which would cost the
// rollout a wait for a fresh one, a round trip per step).
func (a *Activities) awaitObserved(ctx context.Context, sts *appsv1.StatefulSet) {
	if sts.Status.ObservedGeneration >= sts.Generation {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, observeWait)
	defer cancel()
	w, err := a.Kube.AppsV1().StatefulSets(sts.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + sts.Name, ResourceVersion: sts.ResourceVersion})
	if err != nil {
		return // the read says it is stale, and the wait waits
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		s, ok := ev.Object.(*appsv1.StatefulSet)
		if !ok || ev.Type == watch.Deleted || s.Name == sts.Name && s.Status.ObservedGeneration >= sts.Generation {
			return
		}
	}
}

// DeleteStuckPodsInput names pods a return to Revision deletes: ordinals
// of the StatefulSet that run another revision and are not Ready.
type DeleteStuckPodsInput struct {
	StatefulSetRef
	Revision string  `json:"revision"`
	Ordinals []int32 `json:"ordinals"`
}

// DeleteStuckPods deletes the pods a return to the previous revision would
// otherwise wait on forever (statefulset.ForcedRollback): each only if, read again,
// it still runs another revision and is not Ready, and with its UID as a
// precondition (never a pod created since). Its claim stays: the
// controller recreates the pod at the update revision with the same claim.
func (a *Activities) DeleteStuckPods(ctx context.Context, in DeleteStuckPodsInput) error {
	pods := a.Kube.CoreV1().Pods(in.Namespace)
	for _, ord := range in.Ordinals {
		name := fmt.Sprintf("%s-%d", in.Name, ord)
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get pod %s/%s: %w", in.Namespace, name, err)
		}
		if ready, _ := podReady(p); ready || p.DeletionTimestamp != nil || p.Labels[appsv1.ControllerRevisionHashLabelKey] == in.Revision {
			continue
		}
		err = pods.Delete(ctx, name, uidPrecondition(p.UID))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete pod %s/%s: %w", in.Namespace, name, err)
		}
	}
	return nil
}

// RevertStatefulSetInput names the revision a return writes back.
type RevertStatefulSetInput struct {
	StatefulSetRef
	// Revision is the ControllerRevision whose template the StatefulSet
	// runs again (the revision its pods ran before the rollout).
	Revision string `json:"revision"`
	// TemplateHash is the TemplateHashAnnotation that template was applied
	// with ("": the hash of the revision's template, which the API server
	// defaulted, and so differs from the manifest's).
	TemplateHash string `json:"templateHash,omitempty"`
}

// RevertStatefulSet writes the pod template of ControllerRevision
// in.Revision back onto the StatefulSet (kubectl rollout undo of a
// StatefulSet), keeping its partition: the controller's update revision
// becomes that revision again, and the ordinals the rollout released go
// back to it as the steps lower the partition. The claims are untouched.
// Writing it again changes nothing.
func (a *Activities) RevertStatefulSet(ctx context.Context, in RevertStatefulSetInput) (*StatefulSetState, error) {
	if in.Revision == "" {
		return nil, invalidInput("revertStatefulSet: revision is required")
	}
	rev, err := a.Kube.AppsV1().ControllerRevisions(in.Namespace).Get(ctx, in.Revision, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get controllerrevision %s/%s: %w", in.Namespace, in.Revision, err)
	}
	sets := a.Kube.AppsV1().StatefulSets(in.Namespace)
	sts, err := sets.Get(ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get statefulset %s/%s: %w", in.Namespace, in.Name, err)
	}
	if !metav1.IsControlledBy(rev, sts) {
		return nil, notAllowed(in.Namespace, fmt.Sprintf("has a ControllerRevision %s that is not StatefulSet %s's", in.Revision, in.Name))
	}
	// The StatefulSet controller records a revision as a patch of the
	// StatefulSet that carries its whole pod template.
	var data struct {
		Spec struct {
			Template *corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rev.Data.Raw, &data); err != nil || data.Spec.Template == nil {
		return nil, invalidInput("controllerrevision %s/%s holds no pod template (%v)", in.Namespace, in.Revision, err)
	}
	hash := in.TemplateHash
	if hash == "" {
		hash = rollout.ComputeHash(data.Spec.Template, nil)
	}
	if sts.Annotations[TemplateHashAnnotation] != hash || !equality.Semantic.DeepEqual(sts.Spec.Template, *data.Spec.Template) {
		next := sts.DeepCopy()
		next.Spec.Template = *data.Spec.Template
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[TemplateHashAnnotation] = hash
		updated, err := sets.Update(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil {
			return nil, fmt.Errorf("write revision %s back onto statefulset %s/%s: %w", in.Revision, in.Namespace, in.Name, err)
		}
		// The read that follows is of the template written back: its
		// update revision is the one returned to, so the failed revision's
		// pods are not counted as updated (as after ApplyStatefulSet).
		a.awaitObserved(ctx, updated)
	}
	return a.ReadStatefulSet(ctx, in.StatefulSetRef)
}

// WaitStatefulSetStepInput is what a stateful rollout last decided, and
// how long it waits for the cluster to change that decision.
type WaitStatefulSetStepInput struct {
	StatefulSetRef
	Target         int32            `json:"target"`
	MaxUnavailable int32            `json:"maxUnavailable"`
	Last           statefulset.Step `json:"last"`
	Partition      int32            `json:"partition"`
	Timeout        time.Duration    `json:"timeout"`
	// Revert: a return, whose forced rollback (pods to delete) ends the
	// wait too.
	Revert bool `json:"revert,omitempty"`
	// Stale: the workflow's last read was of a spec the controller had
	// not yet observed (a partition just written): the first fresh read
	// ends the wait, whatever it shows.
	Stale bool `json:"stale,omitempty"`
}

// statefulSetRetry is how long a wait whose read or watch failed waits
// before it reads again.
var statefulSetRetry = time.Second

// WaitStatefulSetStep follows the StatefulSet and its pods (a read, then
// watches from it, as the StatefulSet controller's own informers do) until
// the step statefulset.Next decides differs from in.Last (a pod turned
// Ready, one was replaced, the partition moved), a return finds pods to
// delete, or in.Timeout passes; it returns what it saw last, with the
// claims read then (a fresh status: never a state the controller has not
// yet observed, unless the timeout passed). A watch that ends or fails is
// followed by a read again. It heartbeats, so a worker's death moves it to
// another within seconds. (It polled once a second before: make bench
// measured each step 10% slower than the native controller's.)
func (a *Activities) WaitStatefulSetStep(ctx context.Context, in WaitStatefulSetStepInput) (*StatefulSetState, error) {
	if in.Timeout <= 0 {
		return nil, invalidInput("waitStatefulSetStep: timeout must be positive")
	}
	done := func(st *StatefulSetState) bool {
		switch {
		case st.Stale:
			return false
		case in.Stale:
			return true
		}
		if in.Revert {
			if p, del := statefulset.ForcedRollback(st.Observed); p != st.Partition || len(del) > 0 {
				return true
			}
		}
		return st.Partition != in.Partition || statefulset.Next(st.Observed, in.Target, in.MaxUnavailable) != in.Last
	}
	// The heartbeat runs apart from the reads: with etcd down, the API
	// server holds a read for up to a minute, longer than the heartbeat
	// timeout, and the wait was timed out as if its worker had died.
	defer heartbeatWhileRunning(ctx)()
	waitCtx, cancel := context.WithTimeout(ctx, in.Timeout)
	defer cancel()
	sts, last, err := a.followStatefulSet(waitCtx, in.StatefulSetRef, done)
	if err != nil {
		return nil, err
	}
	if last == nil {
		// Nothing could be read in the whole wait: one more read, its
		// error the activity's.
		return a.ReadStatefulSet(ctx, in.StatefulSetRef)
	}
	return last, a.readClaims(ctx, sts, last)
}

// followStatefulSet reads ref and watches it and its pods from that read
// until done holds of what it sees, or ctx ends; it returns the StatefulSet
// and the state it saw last (nil if it never read one). A read that fails
// is tried again statefulSetRetry later.
func (a *Activities) followStatefulSet(ctx context.Context, ref StatefulSetRef, done func(*StatefulSetState) bool) (*appsv1.StatefulSet, *StatefulSetState, error) {
	var sts *appsv1.StatefulSet
	var last *StatefulSetState
	for ctx.Err() == nil {
		got, list, err := a.getStatefulSet(ctx, ref)
		if err != nil {
			if appErr := (*temporal.ApplicationError)(nil); errors.As(err, &appErr) && appErr.NonRetryable() {
				return nil, nil, err // a selector that does not parse: no read will
			}
			sleepCtx(ctx, statefulSetRetry)
			continue
		}
		sts = got
		pods := map[string]*corev1.Pod{}
		for i := range list.Items {
			pods[list.Items[i].Name] = &list.Items[i]
		}
		state := func() *StatefulSetState {
			items := make([]corev1.Pod, 0, len(pods))
			for _, p := range pods {
				items = append(items, *p)
			}
			return statefulSetState(sts, items, time.Now())
		}
		if last = state(); done(last) {
			return sts, last, nil
		}
		sel, _ := metav1.LabelSelectorAsSelector(sts.Spec.Selector) // parsed by getStatefulSet
		setW, err := a.Kube.AppsV1().StatefulSets(ref.Namespace).Watch(ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=" + ref.Name, ResourceVersion: sts.ResourceVersion})
		if err != nil {
			sleepCtx(ctx, statefulSetRetry)
			continue
		}
		podW, err := a.Kube.CoreV1().Pods(ref.Namespace).Watch(ctx, metav1.ListOptions{
			LabelSelector: sel.String(), ResourceVersion: list.ResourceVersion})
		if err != nil {
			setW.Stop()
			sleepCtx(ctx, statefulSetRetry)
			continue
		}
		following := true
		for following {
			var avail <-chan time.Time
			if at := nextAvailable(sts, pods, time.Now()); !at.IsZero() {
				avail = time.After(time.Until(at) + 10*time.Millisecond)
			}
			select {
			case <-ctx.Done():
				following = false
				continue
			case <-avail:
			case ev, ok := <-setW.ResultChan():
				if !ok || ev.Type == watch.Error || ev.Type == watch.Deleted {
					following = false // read again (a deleted StatefulSet: the read says so)
					continue
				}
				if s, isSet := ev.Object.(*appsv1.StatefulSet); isSet && s.Name == ref.Name {
					sts = s
				}
			case ev, ok := <-podW.ResultChan():
				if !ok || ev.Type == watch.Error {
					following = false
					continue
				}
				if p, isPod := ev.Object.(*corev1.Pod); isPod {
					if ev.Type == watch.Deleted {
						delete(pods, p.Name)
					} else {
						pods[p.Name] = p
					}
				}
			}
			if last = state(); done(last) {
				setW.Stop()
				podW.Stop()
				return sts, last, nil
			}
		}
		setW.Stop()
		podW.Stop()
	}
	return sts, last, nil
}

// recordHeartbeat records an activity's heartbeat (a test counts them).
var recordHeartbeat = func(ctx context.Context) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx)
	}
}

// heartbeatWhileRunning records the activity's heartbeat every
// heartbeatEvery until the returned function is called (outside an
// activity, it does nothing): a worker's death still stops it within the
// heartbeat timeout, a slow request does not.
func heartbeatWhileRunning(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(heartbeatEvery)
		defer tick.Stop()
		recordHeartbeat(ctx)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				recordHeartbeat(ctx)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// sleepCtx sleeps d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// classifyStatefulSet classifies a stateful service's change by its
// StatefulSet: none runs, or its template (by TemplateHashAnnotation)
// differs, or a rollout of it is still under way: a rollout; the same
// template fully rolled out at another size: scale-only; at the same
// size: none. The template passes the pod policy first. It reads only.
func (a *Activities) classifyStatefulSet(ctx context.Context, in ClassifyInput) (*Classification, error) {
	want := in.StatefulSet
	if err := a.statefulSetPodPolicy(want); err != nil {
		return nil, err
	}
	live, err := a.Kube.AppsV1().StatefulSets(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, fmt.Errorf("get statefulset %s/%s: %w", want.Namespace, want.Name, err)
	}
	c := classifyStatefulSet(want, live)
	c.Service = in.Service
	return c, nil
}

// classifyStatefulSet is classifyStatefulSet's decision, pure.
func classifyStatefulSet(want, live *appsv1.StatefulSet) *Classification {
	c := &Classification{DesiredReplicas: *want.Spec.Replicas, Class: ChangeRollout}
	if cs := want.Spec.Template.Spec.Containers; len(cs) > 0 {
		c.DesiredImage = cs[0].Image
	}
	if live == nil {
		return c
	}
	if live.Spec.Replicas != nil {
		c.CurrentReplicas = *live.Spec.Replicas
	}
	if cs := live.Spec.Template.Spec.Containers; len(cs) > 0 {
		c.CurrentImage = cs[0].Image
	}
	partition := int32(0)
	if ru := live.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = *ru.Partition
	}
	done := live.Status.ObservedGeneration >= live.Generation && live.Status.UpdateRevision == live.Status.CurrentRevision && partition == 0
	if live.Annotations[TemplateHashAnnotation] != rollout.ComputeHash(&want.Spec.Template, nil) || !done {
		return c
	}
	c.Class = ChangeScale
	if c.CurrentReplicas == c.DesiredReplicas {
		c.Class = ChangeNone
	}
	return c
}

// statefulSetPodPolicy is the pod policy's verdict on a StatefulSet's
// template: a non-retryable PodPolicy naming each field, or nil.
func (a *Activities) statefulSetPodPolicy(sts *appsv1.StatefulSet) error {
	if problems := podPolicyProblems("statefulSet.spec.template.spec", &sts.Spec.Template.Spec, a.allowedCapabilities()); len(problems) > 0 {
		return temporal.NewNonRetryableApplicationError(strings.Join(problems, "\n"), ErrPodPolicy, nil)
	}
	return nil
}
