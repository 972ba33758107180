package manifest

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// StrategyBlueGreen brings a service's new version up beside the running
// one (issue 12.4): the new version's pods first serve only the preview
// Service, <service>-preview; promotion (after autoPromotionSeconds, or
// `deployflow promote`) switches the active Service, <service>, to them in
// one selector change; the old version stays up scaleDownDelaySeconds, so
// `deployflow undo` switches back without creating a pod. Both Services
// are pinned to one version by its pod-template-hash.
const StrategyBlueGreen = "BlueGreen"

// BlueGreen is a blue-green rollout's settings.
type BlueGreen struct {
	// AutoPromotionSeconds promotes that long after the preview is up; 0
	// (the default) waits for `deployflow promote`.
	AutoPromotionSeconds int32 `json:"autoPromotionSeconds,omitempty"`
	// ScaleDownDelaySeconds keeps the old version up after the switch, for
	// undo without new pods (default 30).
	ScaleDownDelaySeconds *int32 `json:"scaleDownDelaySeconds,omitempty"`
	// PreviewReplicaCount is the new version's replicas before promotion
	// (default: the service's replicas); it is scaled to the service's
	// replicas before the switch.
	PreviewReplicaCount *int32 `json:"previewReplicaCount,omitempty"`
	// PrePromotionAnalysis gates the promotion on the preview (a failure
	// aborts; the active Service never moved). PostPromotionAnalysis runs
	// after the switch (a failure switches back: the old version is still
	// up).
	PrePromotionAnalysis  *Analysis `json:"prePromotionAnalysis,omitempty"`
	PostPromotionAnalysis *Analysis `json:"postPromotionAnalysis,omitempty"`
}

// The kinds of a blue-green's steps.
const (
	BlueGreenPreview      = "preview"
	BlueGreenPrePromotion = "prePromotionAnalysis"
	BlueGreenPromotion    = "promotion"
	BlueGreenScaleUp      = "scaleUp"
	BlueGreenSwitch       = "switch"
	BlueGreenPostPromo    = "postPromotionAnalysis"
	BlueGreenScaleDown    = "scaleDownDelay"
)

// BlueGreenStep is one step of a blue-green: its kind and how the plan and
// the status say it.
type BlueGreenStep struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// DefaultScaleDownDelaySeconds is a blue-green's scaleDownDelaySeconds when
// unset, as Argo Rollouts'.
const DefaultScaleDownDelaySeconds = 30

// PreviewSuffix names a blue-green service's preview Service:
// <service>-preview.
const PreviewSuffix = "-preview"

// PreviewService is the name of service svc's preview Service.
func PreviewService(svc string) string { return svc + PreviewSuffix }

// PodTemplateHashLabel is the label the rollout engine puts on each
// ReplicaSet's pods (as the Deployment controller does); a blue-green's
// Services select one version by it.
const PodTemplateHashLabel = "pod-template-hash"

// RoleLabel marks a blue-green's Services: "active" or "preview".
const RoleLabel = "deployflow.dev/role"

// Roles of a blue-green service's Services.
const (
	RoleActive  = "active"
	RolePreview = "preview"
)

// ScaleDownDelay is the blue-green's scale-down delay, defaulted.
func (b *BlueGreen) ScaleDownDelay() int32 {
	if b == nil || b.ScaleDownDelaySeconds == nil {
		return DefaultScaleDownDelaySeconds
	}
	return *b.ScaleDownDelaySeconds
}

// PreviewReplicas is how many replicas the preview runs, for a service of
// replicas.
func (b *BlueGreen) PreviewReplicas(replicas int32) int32 {
	if b == nil || b.PreviewReplicaCount == nil || *b.PreviewReplicaCount > replicas {
		return replicas
	}
	return *b.PreviewReplicaCount
}

// Steps are what a blue-green rollout does, in order.
func (b *BlueGreen) Steps(svc, image string, replicas int32) []BlueGreenStep {
	promote := "await promotion (deployflow promote)"
	if b != nil && b.AutoPromotionSeconds > 0 {
		promote = fmt.Sprintf("await promotion (automatic after %ds, or deployflow promote)", b.AutoPromotionSeconds)
	}
	out := []BlueGreenStep{{BlueGreenPreview, fmt.Sprintf("bring up the preview: %d replicas of %s, Service/%s selecting them", b.PreviewReplicas(replicas), image, PreviewService(svc))}}
	if b != nil && b.PrePromotionAnalysis != nil {
		out = append(out, BlueGreenStep{BlueGreenPrePromotion, "pre-promotion " + b.PrePromotionAnalysis.String()})
	}
	out = append(out,
		BlueGreenStep{BlueGreenPromotion, promote},
		BlueGreenStep{BlueGreenScaleUp, fmt.Sprintf("scale the new version to %d replicas", replicas)},
		BlueGreenStep{BlueGreenSwitch, fmt.Sprintf("switch Service/%s to the new version", svc)})
	if b != nil && b.PostPromotionAnalysis != nil {
		out = append(out, BlueGreenStep{BlueGreenPostPromo, "post-promotion " + b.PostPromotionAnalysis.String()})
	}
	return append(out, BlueGreenStep{BlueGreenScaleDown, fmt.Sprintf("keep the old version %ds for undo, then scale it down", b.ScaleDownDelay())})
}

// pinned marks a service's Services as selecting one version: the deploy
// keeps the live pod-template-hash in their selector (the rollout moves
// it).
func pinned(svc *corev1.Service, role string) {
	svc.Labels[RoleLabel] = role
}

func (v *validator) blueGreen(path string, b *BlueGreen, replicas int32) {
	if b == nil {
		return
	}
	if b.AutoPromotionSeconds < 0 {
		v.add(field(path, "autoPromotionSeconds"), "%d is negative: give 0 (wait for deployflow promote) or more seconds", b.AutoPromotionSeconds)
	}
	if d := b.ScaleDownDelaySeconds; d != nil && *d < 0 {
		v.add(field(path, "scaleDownDelaySeconds"), "%d is negative: give 0 or more seconds (the time undo switches back without new pods)", *d)
	}
	// Under the rules of its day (a manifest a lease carries), the upper
	// bound goes: a scale may have taken the service below it since, and
	// the preview is clamped to the replicas (PreviewReplicas).
	if n := b.PreviewReplicaCount; n != nil && (*n < 1 || (*n > replicas && !v.lenient)) {
		v.add(field(path, "previewReplicaCount"), "%d: want 1 to the service's replicas (%s)", *n, strconv.Itoa(int(replicas)))
	}
	if a := b.PrePromotionAnalysis; a != nil {
		v.analysis(field(path, "prePromotionAnalysis"), a)
	}
	if a := b.PostPromotionAnalysis; a != nil {
		v.analysis(field(path, "postPromotionAnalysis"), a)
	}
}
