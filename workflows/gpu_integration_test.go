package workflows_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Issue 37.2: a service's GPUs, on the local stack's fake GPU node (8
// nvidia.com/gpu, labelled model a100, tainted as GPU nodes are). A
// service asking for a100s runs only there, taking its units from the
// lease's GPU quota; a service without GPUs never lands there; a deploy
// asking for a model the provider does not offer is refused before
// anything is written, naming the field, and the lease keeps what runs.
// Before, a manifest could not ask for a GPU at all.
func TestAGPUServiceSchedulesOnlyOntoANodeOfItsModel(t *testing.T) {
	offered, err := manifest.ParseGPUModels(devstack.GPUModels)
	require.NoError(t, err)
	dt := newDeployTestWith(t, func(a *activities.Activities) { a.Limits.GPUModels, a.Limits.GPUs = offered, 8 })
	ns := manifest.Namespace(dt.lease)
	two := int32(2)
	app := func(model string) manifest.Manifest {
		return manifest.Manifest{Lease: dt.lease, Services: []manifest.Service{
			{Name: "web", Image: "nginx:1.27", Replicas: &two, Ports: []manifest.Port{{Port: 80}}},
			{Name: "infer", Image: "vllm/vllm-openai:v0.6.3", Replicas: &two, Resources: &manifest.Resources{
				GPU: &manifest.GPU{Units: 1, Attributes: &manifest.GPUAttributes{Vendor: map[string][]manifest.GPUModel{"nvidia": {{Model: model}}}}},
			}},
		}}
	}

	dt.deploy(app(devstack.GPUNodeModel))
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	nodeOf := func(svc string) map[string]string {
		pods, err := dt.env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=" + svc})
		require.NoError(t, err)
		nodes := map[string]string{}
		for _, p := range pods.Items {
			nodes[p.Name] = p.Spec.NodeName
			if svc == "infer" {
				assert.Equal(t, resource.MustParse("1"), p.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"], "pod %s takes one GPU", p.Name)
			}
		}
		require.Len(t, nodes, 2, "%s's pods", svc)
		return nodes
	}
	for pod, node := range nodeOf("infer") {
		assert.Equal(t, devstack.GPUNode, node, "GPU pod %s runs on the node of its model", pod)
	}
	for pod, node := range nodeOf("web") {
		assert.NotEqual(t, devstack.GPUNode, node, "pod %s, without GPUs, stays off the GPU node", pod)
	}
	quota, err := dt.env.Kube.CoreV1().ResourceQuotas(ns).Get(context.Background(), activities.ProfileName, metav1.GetOptions{})
	require.NoError(t, err)
	hard, used := quota.Spec.Hard["requests.nvidia.com/gpu"], quota.Status.Used["requests.nvidia.com/gpu"]
	assert.Equal(t, "16", hard.String(), "the lease's GPU quota (--lease-quota-gpus)")
	assert.Equal(t, "2", used.String(), "the lease's two GPU pods count against it")

	// A model this provider does not offer: refused, naming the field and
	// the operator's list, and the running version stays.
	why := dt.refusal(app("l40s"))
	assert.Contains(t, why, "services[1].resources.gpu.attributes.vendor.nvidia[0].model: l40s: this provider offers no nvidia GPU of this model (the operator's --gpu-models: nvidia/a100,nvidia/h100)")
	pods, err := dt.env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=infer"})
	require.NoError(t, err)
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == devstack.GPUNode {
			running++
		}
	}
	assert.Equal(t, 2, running, "the refused deploy took nothing away")
}
