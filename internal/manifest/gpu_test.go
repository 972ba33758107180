package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func gpuManifest(units int32, replicas int32, vendor string, models ...string) *Manifest {
	var ms []GPUModel
	for _, m := range models {
		ms = append(ms, GPUModel{Model: m})
	}
	return &Manifest{Lease: "shop", Services: []Service{{Name: "infer", Image: "vllm/vllm-openai:v0.6.3", Replicas: &replicas,
		Resources: &Resources{CPU: "2", GPU: &GPU{Units: units, Attributes: &GPUAttributes{Vendor: map[string][]GPUModel{vendor: ms}}}}}}}
}

// Issue 37.2: a service's GPUs are its container's vendor resource
// (request and limit), its models a required node affinity on the
// provider's model label, and the vendor's GPU taint is tolerated. They
// survive the defaults being filled.
func TestGPUsRenderAsTheVendorsResourceAndModelAffinity(t *testing.T) {
	m := gpuManifest(2, 1, "nvidia", "a100", "h100")
	require.NoError(t, m.Validate())
	d, err := m.WithDefaults().Deployment("infer")
	require.NoError(t, err)
	pod := d.Spec.Template.Spec
	r := pod.Containers[0].Resources
	assert.Equal(t, resource.MustParse("2"), r.Limits["nvidia.com/gpu"])
	assert.Equal(t, resource.MustParse("2"), r.Requests["nvidia.com/gpu"])
	assert.Equal(t, resource.MustParse("2"), r.Limits[corev1.ResourceCPU], "CPU beside it")
	require.NotNil(t, pod.Affinity)
	terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	require.Len(t, terms, 1)
	assert.Equal(t, []corev1.NodeSelectorRequirement{{Key: GPUModelLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"a100", "h100"}}}, terms[0].MatchExpressions)
	assert.Equal(t, []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, pod.Tolerations)

	// Any model of the vendor: the resource alone places the pod.
	d, err = gpuManifest(1, 1, "amd").WithDefaults().Deployment("infer")
	require.NoError(t, err)
	assert.Nil(t, d.Spec.Template.Spec.Affinity)
	assert.Equal(t, resource.MustParse("1"), d.Spec.Template.Spec.Containers[0].Resources.Limits["amd.com/gpu"])

	// A service without GPUs renders as before (its pod-template hash,
	// hence its ReplicaSets, unchanged).
	plain := &Manifest{Lease: "shop", Services: []Service{{Name: "web", Image: "nginx:1.27", Resources: &Resources{CPU: "1"}}}}
	d, err = plain.WithDefaults().Deployment("web")
	require.NoError(t, err)
	assert.Nil(t, d.Spec.Template.Spec.Affinity)
	assert.Nil(t, d.Spec.Template.Spec.Tolerations)
}

// The provider's GPUs bound what a manifest may ask for, before anything
// is written: none offered, a vendor or a model not offered, more GPUs
// than --max-gpus, each named with the field and the operator's flag.
func TestGPUsAreCheckedAgainstWhatTheProviderOffers(t *testing.T) {
	l := DefaultLimits()
	for _, c := range []struct {
		name    string
		m       *Manifest
		offered []string
		max     int
		want    string // "" is accepted
	}{
		{"none offered", gpuManifest(1, 1, "nvidia", "a100"), nil, 8, "services[0].resources.gpu.units: this provider offers no GPUs (the operator's --gpu-models is empty)"},
		{"model offered", gpuManifest(1, 1, "nvidia", "a100"), []string{"nvidia/a100"}, 8, ""},
		{"one of the models offered", gpuManifest(1, 1, "nvidia", "h100", "a100"), []string{"nvidia/a100"}, 8, "services[0].resources.gpu.attributes.vendor.nvidia[0].model: h100: this provider offers no nvidia GPU of this model (the operator's --gpu-models: nvidia/a100)"},
		{"any model of an offered vendor", gpuManifest(1, 1, "nvidia"), []string{"nvidia/a100"}, 8, ""},
		{"every model of the vendor", gpuManifest(1, 1, "nvidia", "h200"), []string{"nvidia/*"}, 8, ""},
		{"vendor not offered", gpuManifest(1, 1, "amd", "mi300x"), []string{"nvidia/a100"}, 8, "services[0].resources.gpu.attributes.vendor.amd: this provider offers no amd GPUs (the operator's --gpu-models: nvidia/a100)"},
		{"units times replicas over the limit", gpuManifest(2, 3, "nvidia", "a100"), []string{"nvidia/a100"}, 4, "services[*].resources.gpu.units: 6 GPUs in all (units times replicas): this provider allows at most 4 per lease (the operator's --max-gpus)"},
		{"at the limit", gpuManifest(2, 2, "nvidia", "a100"), []string{"nvidia/a100"}, 4, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.m.Validate())
			l.GPUModels, l.GPUs = c.offered, c.max
			err := c.m.CheckLimits(l)
			if c.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestParseGPUModels(t *testing.T) {
	got, err := ParseGPUModels(" nvidia/a100,,amd/* ")
	require.NoError(t, err)
	assert.Equal(t, []string{"nvidia/a100", "amd/*"}, got)
	got, err = ParseGPUModels("")
	require.NoError(t, err)
	assert.Empty(t, got)
	for _, bad := range []string{"a100", "nvidia/", "nvidia/A100", "intel/arc"} {
		_, err := ParseGPUModels(bad)
		assert.Error(t, err, bad)
	}
}
