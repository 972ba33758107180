package devstack

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a fake pod serves: a Ready pod with an IP in the range, on each TCP
// port of each container, as itself and that container's image; nothing
// for a pod not Ready, going, or outside the range.
func TestAPodServesItsTCPPortsOnlyWhileReady(t *testing.T) {
	p := &podServer{prefix: netip.MustParsePrefix("10.244.0.0/16")}
	pod := func(ip string, ready corev1.ConditionStatus, deleting bool) *corev1.Pod {
		pd := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "lease-a", Name: "web-1", UID: "u1"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}},
				{Name: "side", Image: "envoy:1", Ports: []corev1.ContainerPort{{ContainerPort: 9901, Protocol: corev1.ProtocolTCP}}},
			}},
			Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
		}
		if deleting {
			pd.DeletionTimestamp = &metav1.Time{}
		}
		return pd
	}
	assert.Equal(t, map[string]endpoint{
		"10.244.0.7:80":   {uid: "u1", pod: "lease-a/web-1", image: "nginx:1.27"},
		"10.244.0.7:9901": {uid: "u1", pod: "lease-a/web-1", image: "envoy:1"},
	}, p.endpoints(pod("10.244.0.7", corev1.ConditionTrue, false)))
	assert.Empty(t, p.endpoints(pod("10.244.0.7", corev1.ConditionFalse, false)), "not Ready")
	assert.Empty(t, p.endpoints(pod("10.244.0.7", corev1.ConditionTrue, true)), "going")
	assert.Empty(t, p.endpoints(pod("192.0.2.7", corev1.ConditionTrue, false)), "outside the range")
	assert.Empty(t, p.endpoints(pod("", corev1.ConditionTrue, false)), "no IP yet")
}
