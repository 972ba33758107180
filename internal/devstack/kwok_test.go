package devstack

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Guards make bench-scale's 20,000 one-pod leases (issue 40.4): the
// schedulable fake nodes take them all, and a node an earlier stack
// registered with less room (its etcd is kept between ups) gets the room
// it has now. Before, two nodes of 10,000 pods left the last leases'
// pods Pending, and a node's capacity was only ever completed, never
// grown.
func TestTheFakeNodesTakeTheScaleModesLeasesAndAnOlderNodeIsGrown(t *testing.T) {
	room := int64(0)
	for _, name := range FakeNodes {
		if name == GPUNode {
			continue // tainted: only GPU pods
		}
		room += fakeNode(name).Status.Capacity.Pods().Value()
	}
	assert.GreaterOrEqual(t, room, int64(20000+1000), "pods the nodes take: 20,000 leases and the stack's own")

	old := fakeNode(FakeNodes[0])
	old.Status.Capacity[corev1.ResourcePods] = resource.MustParse("10000")
	old.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("10000")
	cs := fake.NewClientset(old)
	require.NoError(t, keepCapacity(context.Background(), cs, fakeNode(FakeNodes[0])))
	n, err := cs.CoreV1().Nodes().Get(context.Background(), FakeNodes[0], metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, fakeNode(FakeNodes[0]).Status.Allocatable.Pods().Value(), n.Status.Allocatable.Pods().Value())
}
