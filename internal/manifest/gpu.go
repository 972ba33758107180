package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// What GPUs a service's container needs (issue 37.2), as an Akash SDL
// writes them: a number of units of one vendor, optionally of given
// models. A provider says which vendors and models it offers
// (--gpu-models, as an Akash provider's capabilities attributes) and how
// many units one lease may take (--max-gpus); a manifest asking for
// others is refused before anything is written. In the pod, the units
// are the vendor's extended resource (nvidia.com/gpu), the models a
// required node affinity on GPUModelLabel, and the vendor's taint on GPU
// nodes is tolerated.

// GPU is a service's GPUs: Units of the one vendor Attributes name.
type GPU struct {
	// Units is the GPUs each replica takes, 1 to MaxGPUUnits (0: none).
	Units int32 `json:"units"`
	// Attributes name the vendor (required with units) and its models.
	Attributes *GPUAttributes `json:"attributes,omitempty"`
}

// GPUAttributes name the GPUs' vendor and, optionally, models.
type GPUAttributes struct {
	// Vendor maps the one vendor (nvidia or amd) to the models the
	// service may run on, any of them; an empty list is any model.
	Vendor map[string][]GPUModel `json:"vendor"`
}

// GPUModel is a GPU model a service may run on.
type GPUModel struct {
	// Model is the model's name as the provider labels its nodes,
	// lowercase letters, digits and '-' (a100, h100, rtx-4090).
	Model string `json:"model"`
}

// GPUModelLabel is the node label a provider puts on each GPU node, its
// GPU model as value (a100): a service asking for models runs only on
// nodes labelled with one of them.
const GPUModelLabel = "deployflow.dev/gpu-model"

// GPUVendors are the vendors a manifest may name, with the extended
// resource each one's device plugin advertises.
var GPUVendors = map[string]corev1.ResourceName{
	"nvidia": "nvidia.com/gpu",
	"amd":    "amd.com/gpu",
}

// The bounds of a service's GPUs.
const (
	MaxGPUUnits  = 64
	MaxGPUModels = 8
)

func (g *GPU) clone() *GPU {
	if g == nil {
		return nil
	}
	out := &GPU{Units: g.Units}
	if a := g.Attributes; a != nil {
		out.Attributes = &GPUAttributes{}
		if a.Vendor != nil {
			out.Attributes.Vendor = make(map[string][]GPUModel, len(a.Vendor))
			for k, v := range a.Vendor {
				out.Attributes.Vendor[k] = slices.Clone(v)
			}
		}
	}
	return out
}

// vendor is g's one vendor and its models ("" if it names none or
// several).
func (g *GPU) vendor() (string, []GPUModel) {
	if g == nil || g.Attributes == nil || len(g.Attributes.Vendor) != 1 {
		return "", nil
	}
	for v, models := range g.Attributes.Vendor {
		return v, models
	}
	return "", nil
}

// validate adds a problem for each field of g, at path, out of bounds.
func (g *GPU) validate(v *validator, path string) {
	if g == nil {
		return
	}
	switch {
	case g.Units < 0:
		v.add(field(path, "units"), "%d is negative: use 1 to %d, or leave gpu out", g.Units, MaxGPUUnits)
	case g.Units > MaxGPUUnits:
		v.add(field(path, "units"), "%d GPUs per replica is too many: use at most %d", g.Units, MaxGPUUnits)
	}
	if g.Attributes == nil || len(g.Attributes.Vendor) == 0 {
		if g.Units > 0 {
			v.add(field(path, "attributes.vendor"), "is required with units: name the vendor, e.g. vendor: {nvidia: [{model: a100}]} (nvidia or amd)")
		}
		return
	}
	vendors := slices.Sorted(maps.Keys(g.Attributes.Vendor))
	if len(vendors) > 1 {
		v.add(field(path, "attributes.vendor"), "names %d vendors (%s): a container takes GPUs of one vendor, name one", len(vendors), strings.Join(vendors, ", "))
	}
	for _, name := range vendors {
		vp := key(field(path, "attributes.vendor"), name)
		if _, ok := GPUVendors[name]; !ok {
			v.add(vp, "%q is not a GPU vendor: use nvidia or amd", truncate(name, 40))
			continue
		}
		models := g.Attributes.Vendor[name]
		if len(models) > MaxGPUModels {
			v.add(vp, "%d models: list at most %d", len(models), MaxGPUModels)
		}
		for i, m := range models {
			if len(validation.IsDNS1123Label(m.Model)) > 0 {
				v.add(field(index(vp, i), "model"), "%q is not a GPU model name: use lowercase letters, digits and '-', as the provider labels its nodes (e.g. a100)", truncate(m.Model, 40))
			}
		}
	}
}

// resources sets the vendor's extended resource to the units in
// requests and limits (an extended resource's request is its limit).
func (g *GPU) resources(list corev1.ResourceList) {
	name, _ := g.vendor()
	if g == nil || g.Units <= 0 || name == "" {
		return
	}
	list[GPUVendors[name]] = resource.MustParse(strconv.Itoa(int(g.Units))) // parsed, as every quantity of the manifest
}

// placement is the pod's node affinity and tolerations for g: a node
// with one of its models, and the vendor's GPU taint tolerated (GPU
// nodes are commonly tainted with their resource's name so that no other
// pod takes them).
func (g *GPU) placement() (*corev1.Affinity, []corev1.Toleration) {
	name, models := g.vendor()
	if g == nil || g.Units <= 0 || name == "" {
		return nil, nil
	}
	tolerations := []corev1.Toleration{{Key: string(GPUVendors[name]), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if len(models) == 0 {
		return nil, tolerations
	}
	var values []string
	for _, m := range models {
		if !slices.Contains(values, m.Model) {
			values = append(values, m.Model)
		}
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: GPUModelLabel, Operator: corev1.NodeSelectorOpIn, Values: values}},
		}}},
	}}, tolerations
}

// ParseGPUModels parses the operator's --gpu-models: comma-separated
// vendor/model (nvidia/a100) or vendor/* (any model of the vendor).
func ParseGPUModels(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		vendor, model, ok := strings.Cut(f, "/")
		if _, known := GPUVendors[vendor]; !ok || !known {
			return nil, fmt.Errorf("--gpu-models %q: want vendor/model or vendor/*, the vendor nvidia or amd (e.g. nvidia/a100,nvidia/h100)", f)
		}
		if model != "*" && len(validation.IsDNS1123Label(model)) > 0 {
			return nil, fmt.Errorf("--gpu-models %q: the model is a node label value, lowercase letters, digits and '-' (e.g. nvidia/a100)", f)
		}
		out = append(out, vendor+"/"+model)
	}
	return out, nil
}

// checkGPUs adds a problem for each service of m asking for GPUs this
// provider does not offer (offered: --gpu-models, vendor/model or
// vendor/*) and one if the lease's GPUs (units times replicas, all
// services) are more than maxGPUs (--max-gpus).
func (m *Manifest) checkGPUs(v *problems, offered []string, maxGPUs int) {
	total := 0
	for i := range m.Services {
		s := &m.Services[i]
		if s.Resources == nil || s.Resources.GPU == nil || s.Resources.GPU.Units <= 0 {
			continue
		}
		g := s.Resources.GPU
		path := field(index("services", i), "resources.gpu")
		replicas := int32(DefaultReplicas)
		if s.Replicas != nil {
			replicas = *s.Replicas
		}
		total += int(g.Units) * int(replicas)
		vendor, models := g.vendor()
		if len(offered) == 0 {
			v.add(field(path, "units"), "this provider offers no GPUs (the operator's --gpu-models is empty)")
			continue
		}
		if slices.Contains(offered, vendor+"/*") {
			continue
		}
		var ofVendor []string
		for _, o := range offered {
			if after, ok := strings.CutPrefix(o, vendor+"/"); ok {
				ofVendor = append(ofVendor, after)
			}
		}
		if len(ofVendor) == 0 {
			v.add(key(field(path, "attributes.vendor"), vendor), "this provider offers no %s GPUs (the operator's --gpu-models: %s)", vendor, strings.Join(offered, ","))
			continue
		}
		if len(models) == 0 {
			continue // any model: the node affinity is the resource's
		}
		for j, mo := range models {
			if !slices.Contains(ofVendor, mo.Model) {
				v.add(field(index(key(field(path, "attributes.vendor"), vendor), j), "model"), "%s: this provider offers no %s GPU of this model (the operator's --gpu-models: %s)", mo.Model, vendor, strings.Join(offered, ","))
			}
		}
	}
	if total > maxGPUs && len(offered) > 0 {
		v.add("services[*].resources.gpu.units", "%d GPUs in all (units times replicas): this provider allows at most %d per lease (the operator's --max-gpus)", total, maxGPUs)
	}
}
