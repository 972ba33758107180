package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// Issue 39.4: the stack binds claims. A StatefulSet of two replicas with a
// volumeClaimTemplate of the stack's StorageClass gets a claim per
// ordinal, each Bound to a volume of its own, and two Ready pods (the
// StatefulSet controller runs in the stack's controller-manager); a pod
// deleted comes back with the same claim, Bound to the same volume; and
// the namespace's deletion deletes the claims and their volumes.
func TestAStatefulSetsClaimsAreBoundAndOutliveItsPods(t *testing.T) {
	s := runningStack(t)
	ctx := context.Background()
	cs, err := clientsetOf(s.Kubeconfig())
	require.NoError(t, err)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "devstack-storage-" + hex.EncodeToString(b)
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To(int32(2)), ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: labels},
		PodManagementPolicy: appsv1.ParallelPodManagement,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "db", Image: "postgres:17",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql/data"}}}},
		}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(StorageClass), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}},
	}}
	_, err = cs.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
	require.NoError(t, err)

	// bound is each claim's volume once both claims are Bound and both
	// pods Ready.
	bound := func() map[string]string {
		var out map[string]string
		last := ""
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			out = map[string]string{}
			claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range claims.Items {
				if c.Status.Phase == corev1.ClaimBound {
					out[c.Name] = c.Spec.VolumeName
				}
			}
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			ready := 0
			for _, p := range pods.Items {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
						ready++
					}
				}
			}
			last = fmt.Sprintf("%d claims bound %v, %d pods Ready", len(out), out, ready)
			return len(out) == 2 && ready == 2, nil
		})
		require.NoError(t, err, last)
		return out
	}
	first := bound()
	names := make([]string, 0, len(first))
	for name := range first {
		names = append(names, name)
	}
	sort.Strings(names)
	assert.Equal(t, []string{"data-db-0", "data-db-1"}, names, "a claim per ordinal")
	assert.NotEqual(t, first["data-db-0"], first["data-db-1"], "a volume each")
	for _, v := range first {
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, v, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, StorageClass, pv.Spec.StorageClassName)
		assert.Equal(t, resource.MustParse("1Gi"), pv.Spec.Capacity[corev1.ResourceStorage])
	}

	// A pod replaced keeps its claim and volume.
	old, err := cs.CoreV1().Pods(ns).Get(ctx, "db-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, "db-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "db-1", metav1.GetOptions{})
		return err == nil && p.UID != old.UID, nil
	}), "db-1 never came back")
	assert.Equal(t, first, bound(), "db-1 back with the same claim, bound to the same volume")

	// The namespace deleted: its claims and their volumes go.
	require.NoError(t, cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, v := range first {
			if _, err := cs.CoreV1().PersistentVolumes().Get(ctx, v, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	}), "the claims' volumes outlived the namespace")
}
