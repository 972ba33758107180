package activities

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/rollout"
	"github.com/deployflow/deployflow/k8s/statefulset"
)

func dbStatefulSet(t *testing.T, image string, replicas int32, size string) ApplyStatefulSetInput {
	t.Helper()
	m := manifest.Manifest{Lease: "shop", Services: []manifest.Service{{Name: "db", Image: image, Replicas: &replicas,
		Volumes: []manifest.Volume{{Name: "data", Size: size, MountPath: "/data", Persistent: true, Class: "local"}}}}}
	sts, err := m.WithDefaults().StatefulSet("db")
	require.NoError(t, err)
	return ApplyStatefulSetInput{StatefulSet: *sts}
}

func partitionOf(t *testing.T, kc *fake.Clientset) int32 {
	t.Helper()
	sts, err := kc.AppsV1().StatefulSets("lease-shop").Get(context.Background(), "db", metav1.GetOptions{})
	require.NoError(t, err)
	return *sts.Spec.UpdateStrategy.RollingUpdate.Partition
}

// Issue 39.2: a StatefulSet is created, and a new template applied, with
// the partition holding every ordinal, so the StatefulSet controller
// replaces no pod until the rollout lowers it; the same template applied
// again (a retry, a scale) keeps the rollout's partition.
func TestApplyStatefulSetHoldsEveryPodUntilTheRolloutReleasesThem(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewClientset()
	a := &Activities{Kube: kc}
	_, err := a.ApplyStatefulSet(ctx, dbStatefulSet(t, "postgres:16", 3, "1Gi"))
	require.NoError(t, err)
	assert.Equal(t, int32(3), partitionOf(t, kc), "created holding every ordinal")

	require.NoError(t, a.SetPartition(ctx, SetPartitionInput{StatefulSetRef: StatefulSetRef{Namespace: "lease-shop", Name: "db"}, Partition: 0}))
	assert.Equal(t, int32(0), partitionOf(t, kc))
	_, err = a.ApplyStatefulSet(ctx, dbStatefulSet(t, "postgres:16", 3, "1Gi"))
	require.NoError(t, err)
	assert.Equal(t, int32(0), partitionOf(t, kc), "the same template again: the rollout's partition stays")
	_, err = a.ApplyStatefulSet(ctx, dbStatefulSet(t, "postgres:16", 4, "1Gi"))
	require.NoError(t, err)
	assert.Equal(t, int32(0), partitionOf(t, kc), "a scale: the partition stays")

	_, err = a.ApplyStatefulSet(ctx, dbStatefulSet(t, "postgres:17", 4, "1Gi"))
	require.NoError(t, err)
	assert.Equal(t, int32(4), partitionOf(t, kc), "a new template: held at the replicas")
	sts, err := kc.AppsV1().StatefulSets("lease-shop").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "postgres:17", sts.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, int32(4), *sts.Spec.Replicas)

	// Scaled up while that rollout is under way (its step at partition
	// 3): the new ordinals must not come at the update revision outside
	// its steps, so the partition rises with them (review).
	require.NoError(t, a.SetPartition(ctx, SetPartitionInput{StatefulSetRef: StatefulSetRef{Namespace: "lease-shop", Name: "db"}, Partition: 3}))
	sts, err = kc.AppsV1().StatefulSets("lease-shop").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	sts.Status = appsv1.StatefulSetStatus{UpdateRevision: "db-17", CurrentRevision: "db-16"}
	_, err = kc.AppsV1().StatefulSets("lease-shop").UpdateStatus(ctx, sts, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = a.ApplyStatefulSet(ctx, dbStatefulSet(t, "postgres:17", 6, "1Gi"))
	require.NoError(t, err)
	assert.Equal(t, int32(5), partitionOf(t, kc), "3 + the 2 new ordinals")
}

// A StatefulSet's claim templates are fixed once created, and one that is
// not the service's is not deployflow's to write: both are refused
// without a write, non-retryable.
func TestApplyStatefulSetRefusesOtherClaimsAndAnotherOwnersStatefulSet(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewClientset()
	a := &Activities{Kube: kc}
	_, err := a.ApplyStatefulSet(ctx, dbStatefulSet(t, "postgres:16", 3, "1Gi"))
	require.NoError(t, err)
	writes := len(kc.Actions())
	reordered := dbStatefulSet(t, "postgres:16", 3, "1024Mi")
	_, err = a.ApplyStatefulSet(ctx, reordered)
	require.NoError(t, err, "the same size written another way is the same claim")
	_, err = a.ApplyStatefulSet(ctx, dbStatefulSet(t, "postgres:16", 3, "2Gi"))
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), "its claim templates are fixed once created")
	readOnly(t, kc, writes)

	foreign := dbStatefulSet(t, "postgres:16", 3, "1Gi")
	other := foreign.StatefulSet.DeepCopy()
	other.Namespace, other.Labels = "lease-other", map[string]string{manifest.ServiceLabel: "db", manifest.LeaseLabel: "intruder"}
	_, err = kc.AppsV1().StatefulSets("lease-other").Create(ctx, other, metav1.CreateOptions{})
	require.NoError(t, err)
	foreign.StatefulSet.Namespace = "lease-other"
	writes = len(kc.Actions())
	_, err = a.ApplyStatefulSet(ctx, foreign)
	require.ErrorAs(t, err, &appErr)
	assert.Contains(t, err.Error(), "has a StatefulSet db that is not service db's")
	readOnly(t, kc, writes)
}

// ReadStatefulSet reads each pod's ordinal and revision, Ready and
// available (Ready for minReadySeconds) as a step decides on them, only
// the StatefulSet's own pods, and its claims with their volumes.
func TestReadStatefulSetReadsWhatAStepDecidesOn(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewClientset()
	a := &Activities{Kube: kc}
	in := dbStatefulSet(t, "postgres:16", 3, "1Gi")
	in.StatefulSet.Spec.MinReadySeconds = 3600
	_, err := a.ApplyStatefulSet(ctx, in)
	require.NoError(t, err)
	sts, err := kc.AppsV1().StatefulSets("lease-shop").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	sts.UID = "sts-uid"
	sts.Generation, sts.Status = 2, appsv1.StatefulSetStatus{ObservedGeneration: 1, UpdateRevision: "db-new", CurrentRevision: "db-old"}
	_, err = kc.AppsV1().StatefulSets("lease-shop").Update(ctx, sts, metav1.UpdateOptions{})
	require.NoError(t, err)
	pod := func(name, rev string, ready bool, readySince metav1.Time, owner string) *corev1.Pod {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "lease-shop",
			Labels:          map[string]string{manifest.AppLabel: "db", appsv1.ControllerRevisionHashLabelKey: rev},
			OwnerReferences: []metav1.OwnerReference{{UID: "sts-uid", Controller: ptr.To(owner == "sts-uid")}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: readySince}}}}
	}
	long, now := metav1.Unix(0, 0), metav1.Now()
	for _, p := range []*corev1.Pod{
		pod("db-0", "db-old", true, long, "sts-uid"), pod("db-1", "db-old", true, now, "sts-uid"),
		pod("db-2", "db-new", false, now, "sts-uid"), pod("db-backup", "x", true, long, "sts-uid"), pod("db-9", "db-new", true, long, "other"),
	} {
		_, err := kc.CoreV1().Pods("lease-shop").Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = kc.CoreV1().PersistentVolumeClaims("lease-shop").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Name: "data-db-0", Namespace: "lease-shop", Labels: map[string]string{manifest.ServiceLabel: "db"}}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	st, err := a.ReadStatefulSet(ctx, StatefulSetRef{Namespace: "lease-shop", Name: "db"})
	require.NoError(t, err)
	assert.True(t, st.Stale, "the controller has not observed generation 2")
	assert.Equal(t, "db-new", st.UpdateRevision)
	assert.Equal(t, "db-old", st.CurrentRevision)
	assert.Equal(t, int32(3), st.Partition)
	assert.ElementsMatch(t, []struct {
		Ordinal                       int32
		Revision                      string
		Ready, Available, Terminating bool
	}{
		{0, "db-old", true, true, false}, {1, "db-old", true, false, false}, {2, "db-new", false, false, false},
	}, func() (out []struct {
		Ordinal                       int32
		Revision                      string
		Ready, Available, Terminating bool
	}) {
		for _, p := range st.Pods {
			out = append(out, struct {
				Ordinal                       int32
				Revision                      string
				Ready, Available, Terminating bool
			}{p.Ordinal, p.Revision, p.Ready, p.Available, p.Terminating})
		}
		return out
	}(), "its own pods only (not db-backup, not another owner's db-9); db-1 Ready within minReadySeconds")
	assert.Equal(t, map[string]string{"data-db-0": "pv-1"}, st.Claims)
}

// DeleteStuckPods deletes, of the ordinals it is given, only the pods that
// still run another revision and are not Ready: never a Ready pod, nor one
// of the revision returned to.
func TestDeleteStuckPodsDeletesOnlyPodsOfAnotherRevisionThatAreNotReady(t *testing.T) {
	ctx := context.Background()
	mk := func(name, rev string, ready bool) *corev1.Pod {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "lease-shop", UID: types.UID("uid-" + name),
			Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: rev}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
	}
	kc := fake.NewClientset(mk("db-3", "db-bad", false), mk("db-2", "db-bad", true), mk("db-1", "db-good", false))
	a := &Activities{Kube: kc}
	require.NoError(t, a.DeleteStuckPods(ctx, DeleteStuckPodsInput{StatefulSetRef: StatefulSetRef{Namespace: "lease-shop", Name: "db"},
		Revision: "db-good", Ordinals: []int32{3, 2, 1, 0}}))
	pods, err := kc.CoreV1().Pods("lease-shop").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var left []string
	for _, p := range pods.Items {
		left = append(left, p.Name)
	}
	assert.ElementsMatch(t, []string{"db-2", "db-1"}, left, "db-3 (bad, not Ready) deleted; db-2 Ready and db-1 of the good revision kept; db-0 absent")
}

// readOnly checks that kc's actions since the first n read only.
func readOnly(t *testing.T, kc *fake.Clientset, n int) {
	t.Helper()
	for _, act := range kc.Actions()[n:] {
		assert.Contains(t, []string{"get", "list"}, act.GetVerb(), "nothing written: %v", act)
	}
}

// An abort writes the previous revision's template back from its
// ControllerRevision (kubectl rollout undo of a StatefulSet), keeping the
// partition and every claim; written again it changes nothing; a
// revision another StatefulSet owns is refused.
func TestRevertStatefulSetWritesThePreviousRevisionsTemplateBack(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewClientset()
	a := &Activities{Kube: kc}
	_, err := a.ApplyStatefulSet(ctx, dbStatefulSet(t, "postgres:16", 2, "1Gi"))
	require.NoError(t, err)
	sts, err := kc.AppsV1().StatefulSets("lease-shop").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	sts.UID = "sts-uid"
	_, err = kc.AppsV1().StatefulSets("lease-shop").Update(ctx, sts, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The controller's record of revision db-16: a patch carrying the template.
	// (The API server stored the template defaulted, as it does.)
	stored := sts.Spec.Template.DeepCopy()
	stored.Spec.SchedulerName, stored.Spec.DNSPolicy = corev1.DefaultSchedulerName, corev1.DNSClusterFirst
	data, err := json.Marshal(map[string]any{"spec": map[string]any{"template": stored, "$patch": "replace"}})
	require.NoError(t, err)
	owner := metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
	_, err = kc.AppsV1().ControllerRevisions("lease-shop").Create(ctx, &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "db-16", Namespace: "lease-shop", OwnerReferences: []metav1.OwnerReference{*owner}},
		Data:       runtime.RawExtension{Raw: data}, Revision: 1}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kc.AppsV1().ControllerRevisions("lease-shop").Create(ctx, &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "other-1", Namespace: "lease-shop"}, Data: runtime.RawExtension{Raw: data}}, metav1.CreateOptions{})
	require.NoError(t, err)

	v17, err := a.ApplyStatefulSet(ctx, dbStatefulSet(t, "postgres:17", 2, "1Gi"))
	require.NoError(t, err)
	v16 := dbStatefulSet(t, "postgres:16", 2, "1Gi").StatefulSet
	v16hash := rollout.ComputeHash(&v16.Spec.Template, nil)
	assert.Equal(t, v16hash, v17.ReplacedTemplateHash, "apply says the hash of the template it replaced")
	ref := StatefulSetRef{Namespace: "lease-shop", Name: "db"}
	require.NoError(t, a.SetPartition(ctx, SetPartitionInput{StatefulSetRef: ref, Partition: 1}))

	_, err = a.RevertStatefulSet(ctx, RevertStatefulSetInput{StatefulSetRef: ref, Revision: "db-16", TemplateHash: v17.ReplacedTemplateHash})
	require.NoError(t, err)
	back, err := kc.AppsV1().StatefulSets("lease-shop").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "postgres:16", back.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, int32(1), *back.Spec.UpdateStrategy.RollingUpdate.Partition, "the partition stays: the steps return the released ordinals")
	assert.Len(t, back.Spec.VolumeClaimTemplates, 1)

	_, err = a.RevertStatefulSet(ctx, RevertStatefulSetInput{StatefulSetRef: ref, Revision: "db-16", TemplateHash: v17.ReplacedTemplateHash})
	require.NoError(t, err)
	again, err := kc.AppsV1().StatefulSets("lease-shop").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, back.ResourceVersion, again.ResourceVersion, "written again, it changes nothing")
	// Guards the review's finding: the template written back carried the
	// hash of the API server's defaulted copy, so the lease's own manifest
	// for it, deployed again, was taken for a new template (a rollout that
	// replaced nothing). It carries the hash it was applied with.
	assert.Equal(t, v16hash, again.Annotations[TemplateHashAnnotation])
	require.NoError(t, a.SetPartition(ctx, SetPartitionInput{StatefulSetRef: ref, Partition: 0})) // the return's steps done
	again, err = kc.AppsV1().StatefulSets("lease-shop").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	c := classifyStatefulSet(&v16, again)
	assert.NotEqual(t, ChangeRollout, c.Class, "the manifest of the revision returned to is not a new template")

	_, err = a.RevertStatefulSet(ctx, RevertStatefulSetInput{StatefulSetRef: ref, Revision: "other-1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not StatefulSet db's")
}

// A StatefulSet's pod template passes the pod policy before anything is
// written, as a Deployment's does: a privileged container is refused.
func TestApplyStatefulSetRefusesATemplateThePodPolicyRefuses(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewClientset()
	a := &Activities{Kube: kc}
	in := dbStatefulSet(t, "postgres:16", 1, "1Gi")
	in.StatefulSet.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	_, err := a.ApplyStatefulSet(ctx, in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, ErrPodPolicy, appErr.Type())
	assert.Contains(t, err.Error(), "statefulSet.spec.template.spec.containers[0]")
	_, err = kc.AppsV1().StatefulSets("lease-shop").Get(ctx, "db", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing was written")
}

// What a deploy does to a stateful service, read from its StatefulSet:
// none yet, another template or a rollout still under way is a rollout;
// the same template rolled out is none, or scale-only at another size.
func TestClassifyStatefulSet(t *testing.T) {
	want := dbStatefulSet(t, "postgres:16", 2, "1Gi").StatefulSet
	live := func(image string, replicas, partition int32, current string) *appsv1.StatefulSet {
		s := dbStatefulSet(t, image, replicas, "1Gi").StatefulSet
		s.Annotations = map[string]string{TemplateHashAnnotation: rollout.ComputeHash(&s.Spec.Template, nil)}
		s.Spec.UpdateStrategy = holdAt(partition)
		s.Generation, s.Status.ObservedGeneration = 2, 2
		s.Status.UpdateRevision, s.Status.CurrentRevision = "db-2", current
		return &s
	}
	stale := live("postgres:16", 2, 0, "db-2")
	stale.Status.ObservedGeneration = 1
	for name, c := range map[string]struct {
		live *appsv1.StatefulSet
		want string
	}{
		"none yet":           {nil, ChangeRollout},
		"another image":      {live("postgres:15", 2, 0, "db-2"), ChangeRollout},
		"held mid-rollout":   {live("postgres:16", 2, 1, "db-1"), ChangeRollout},
		"not yet observed":   {stale, ChangeRollout},
		"rolled out":         {live("postgres:16", 2, 0, "db-2"), ChangeNone},
		"rolled out, scaled": {live("postgres:16", 3, 0, "db-2"), ChangeScale},
	} {
		t.Run(name, func(t *testing.T) {
			got := classifyStatefulSet(&want, c.live)
			assert.Equal(t, c.want, got.Class)
			assert.Equal(t, "postgres:16", got.DesiredImage)
		})
	}
}

// A wait whose last read was stale (a partition just written, the
// controller not yet there) ends at the first fresh read, whatever it
// shows: before, a step already reached waited its whole timeout, the
// decision unchanged (found by TestAStatefulServiceDeploysRollsOutAndItsTeardownDeletesItsClaims).
func TestWaitStatefulSetStepEndsAtTheFirstFreshReadAfterAStaleOne(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewClientset()
	a := &Activities{Kube: kc}
	st, err := a.ApplyStatefulSet(ctx, dbStatefulSet(t, "postgres:16", 0, "1Gi"))
	require.NoError(t, err)
	ref := StatefulSetRef{Namespace: "lease-shop", Name: "db"}
	last := statefulset.Next(st.Observed, 0, 1)
	require.True(t, last.Reached, "no replicas: nothing to wait for")
	start := time.Now()
	got, err := a.WaitStatefulSetStep(ctx, WaitStatefulSetStepInput{StatefulSetRef: ref, Last: last, Partition: st.Partition, Timeout: 5 * time.Second, Stale: true})
	require.NoError(t, err)
	assert.False(t, got.Stale)
	assert.Less(t, time.Since(start), 3*time.Second, "ended at the first fresh read, not at the timeout")
}

// Guards the review's finding that a plan's fingerprint read a stateful
// service's ReplicaSets (it has none), so an approved plan stayed fresh
// whatever its StatefulSet did: the digest follows the StatefulSet.
func TestAPlansDigestOfAStatefulServiceFollowsItsStatefulSet(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewClientset()
	a := &Activities{Kube: kc}
	in := dbStatefulSet(t, "postgres:16", 2, "1Gi")
	m := manifest.Manifest{Lease: "shop", Services: []manifest.Service{{Name: "db", Image: "postgres:16", Replicas: ptr.To(int32(2)),
		Volumes: []manifest.Volume{{Name: "data", Size: "1Gi", MountPath: "/data", Persistent: true, Class: "local"}}}}}
	none, err := a.serviceDigest(ctx, &m, "lease-shop", "db")
	require.NoError(t, err)
	assert.Equal(t, nothingRuns().Digest, none, "nothing runs yet")

	_, err = a.ApplyStatefulSet(ctx, in)
	require.NoError(t, err)
	created, err := a.serviceDigest(ctx, &m, "lease-shop", "db")
	require.NoError(t, err)
	assert.NotEqual(t, none, created)
	same, err := a.serviceDigest(ctx, &m, "lease-shop", "db")
	require.NoError(t, err)
	assert.Equal(t, created, same, "read again, unchanged")
	require.NoError(t, a.SetPartition(ctx, SetPartitionInput{StatefulSetRef: StatefulSetRef{Namespace: "lease-shop", Name: "db"}, Partition: 1}))
	moved, err := a.serviceDigest(ctx, &m, "lease-shop", "db")
	require.NoError(t, err)
	assert.NotEqual(t, created, moved, "a partition moved: the plan is stale")
}

// The wait follows the StatefulSet's pods by watch, not a poll: a pod
// turning Ready ends it at once (make bench measured the poll's second a
// step 10% slower than the native controller).
func TestWaitStatefulSetStepEndsWhenAPodTurnsReady(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewClientset()
	a := &Activities{Kube: kc}
	_, err := a.ApplyStatefulSet(ctx, dbStatefulSet(t, "postgres:16", 1, "1Gi"))
	require.NoError(t, err)
	sts, err := kc.AppsV1().StatefulSets("lease-shop").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	sts.UID = "sts-uid"
	sts.Status = appsv1.StatefulSetStatus{UpdateRevision: "db-1", CurrentRevision: "db-1"}
	_, err = kc.AppsV1().StatefulSets("lease-shop").Update(ctx, sts, metav1.UpdateOptions{})
	require.NoError(t, err)
	podLabels := map[string]string{appsv1.ControllerRevisionHashLabelKey: "db-1"}
	maps.Copy(podLabels, sts.Spec.Selector.MatchLabels)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "lease-shop", Labels: podLabels, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	_, err = kc.CoreV1().Pods("lease-shop").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	ref := StatefulSetRef{Namespace: "lease-shop", Name: "db"}
	require.NoError(t, a.SetPartition(ctx, SetPartitionInput{StatefulSetRef: ref, Partition: 0}))
	st, err := a.ReadStatefulSet(ctx, ref)
	require.NoError(t, err)
	last := statefulset.Next(st.Observed, 0, 1)
	require.Equal(t, "db-0 to turn Ready", last.Waiting)

	go func() {
		time.Sleep(100 * time.Millisecond)
		pod.Status.Conditions[0].Status = corev1.ConditionTrue
		pod.Status.Conditions[0].LastTransitionTime = metav1.Now()
		_, _ = kc.CoreV1().Pods("lease-shop").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	}()
	start := time.Now()
	got, err := a.WaitStatefulSetStep(ctx, WaitStatefulSetStepInput{StatefulSetRef: ref, Last: last, Partition: st.Partition, Timeout: 10 * time.Second})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 700*time.Millisecond, "ended by the pod's event, not a poll or the timeout")
	require.Len(t, got.Pods, 1)
	assert.True(t, got.Pods[0].Ready)
	assert.True(t, statefulset.Next(got.Observed, 0, 1).Reached)
}

// Guards the wait's heartbeat against a read the API server holds (etcd
// down: up to a minute): it heartbeat only between reads, so Temporal
// would time the wait out on its heartbeat (15 s) as if its worker had
// died. The heartbeat now runs apart from the reads.
func TestWaitStatefulSetStepHeartbeatsWhileAReadHangs(t *testing.T) {
	kc := fake.NewClientset()
	a := &Activities{Kube: kc}
	st, err := a.ApplyStatefulSet(context.Background(), dbStatefulSet(t, "postgres:16", 0, "1Gi"))
	require.NoError(t, err)
	heartbeats := make(chan struct{}, 16)
	release := make(chan struct{})
	kc.PrependReactor("get", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		select { // the read hangs until two heartbeats were seen, or 8 s
		case <-release:
		case <-time.After(8 * time.Second):
		}
		return false, nil, nil
	})
	record := recordHeartbeat
	t.Cleanup(func() { recordHeartbeat = record })
	recordHeartbeat = func(context.Context) { heartbeats <- struct{}{} }
	go func() {
		for range 2 {
			<-heartbeats
		}
		close(release)
	}()
	start := time.Now()
	_, err = a.WaitStatefulSetStep(context.Background(), WaitStatefulSetStepInput{StatefulSetRef: StatefulSetRef{Namespace: "lease-shop", Name: "db"},
		Last: statefulset.Next(st.Observed, 0, 1), Partition: st.Partition, Timeout: 20 * time.Second, Stale: true})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 7*time.Second, "two heartbeats while the read hung, heartbeatEvery apart")
}
