package workflows_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/statefulset"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 39.2's driver against the stack's own StatefulSet controller:
// ApplyStatefulSet, ReadStatefulSet and SetPartition, stepped by
// statefulset.Next as the stateful rollout will step them. A new
// StatefulSet comes up with a Bound claim per pod; a new image is applied
// with the partition holding every pod, so nothing is replaced until the
// steps lower it; then the pods move to the new revision one at a time
// from the highest ordinal down, and every claim is the one it was, bound
// to the same volume.
func TestAStatefulSetRollsOutByPartitionFromTheHighestOrdinal(t *testing.T) {
	env := testenv.Get(t)
	acts := env.Activities()
	ctx := context.Background()
	lease := testenv.ShortName("sts")
	ns := manifest.Namespace(lease)
	_, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	three := int32(3)
	app := func(image string) activities.ApplyStatefulSetInput {
		m := manifest.Manifest{Lease: lease, Services: []manifest.Service{{Name: "db", Image: image, Replicas: &three,
			Ports:   []manifest.Port{{Port: 5432}},
			Volumes: []manifest.Volume{{Name: "data", Size: "1Gi", MountPath: "/var/lib/postgresql/data", Persistent: true, Class: devstack.StorageClass}}}}}
		sts, err := m.WithDefaults().StatefulSet("db")
		require.NoError(t, err)
		return activities.ApplyStatefulSetInput{StatefulSet: *sts}
	}
	ref := activities.StatefulSetRef{Namespace: ns, Name: "db"}
	// rollOut steps the partition down to 0 and returns, for each ordinal,
	// the order in which it came to run the update revision.
	rollOut := func() map[int32]int {
		became := map[int32]int{}
		testenv.Eventually(t, 2*time.Minute, 100*time.Millisecond, "the rollout never completed", func() (bool, string) {
			st, err := acts.ReadStatefulSet(ctx, ref)
			if err != nil || st.Stale {
				return false, fmt.Sprint(err)
			}
			for _, p := range st.Pods {
				if _, seen := became[p.Ordinal]; !seen && p.Revision == st.UpdateRevision && !p.Terminating {
					became[p.Ordinal] = len(became)
				}
			}
			step := statefulset.Next(st.Observed, 0, 1)
			if step.Partition != st.Partition {
				require.NoError(t, acts.SetPartition(ctx, activities.SetPartitionInput{StatefulSetRef: ref, Partition: step.Partition}))
			}
			return step.Reached && step.Partition == st.Partition, step.Waiting
		})
		return became
	}
	claims := func() map[string]string {
		st, err := acts.ReadStatefulSet(ctx, ref)
		require.NoError(t, err)
		return st.Claims
	}

	st, err := acts.ApplyStatefulSet(ctx, app("postgres:16"))
	require.NoError(t, err)
	assert.Equal(t, int32(3), st.Partition, "created holding every ordinal")
	rollOut()
	var before map[string]string
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the claims were never all Bound", func() (bool, string) {
		before = claims()
		bound := 0
		for _, vol := range before {
			if vol != "" {
				bound++
			}
		}
		return bound == 3, fmt.Sprint(before)
	})
	assert.ElementsMatch(t, []string{"data-db-0", "data-db-1", "data-db-2"}, slices.Collect(maps.Keys(before)))

	// The new image: applied holding every pod, nothing replaced.
	st, err = acts.ApplyStatefulSet(ctx, app("postgres:17"))
	require.NoError(t, err)
	assert.Equal(t, int32(3), st.Partition)
	again, err := acts.ApplyStatefulSet(ctx, app("postgres:17"))
	require.NoError(t, err)
	assert.Equal(t, int32(3), again.Partition, "applied again (a retry), it changes nothing")
	time.Sleep(2 * time.Second)
	st, err = acts.ReadStatefulSet(ctx, ref)
	require.NoError(t, err)
	for _, p := range st.Pods {
		assert.Equal(t, st.CurrentRevision, p.Revision, "db-%d is not replaced while the partition holds it", p.Ordinal)
	}

	became := rollOut()
	assert.Equal(t, map[int32]int{2: 0, 1: 1, 0: 2}, became, "replaced from the highest ordinal down, one at a time")
	assert.Equal(t, before, claims(), "every claim is the one it was, bound to the same volume")

	// Applied once more after the rollout (a retry of its apply): the
	// partition stays at 0.
	st, err = acts.ApplyStatefulSet(ctx, app("postgres:17"))
	require.NoError(t, err)
	assert.Equal(t, int32(0), st.Partition)
}
