package rollout

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/k8s/rollout"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// rolloutCarry is the state a rollout hands to its continued run.
type rolloutCarry struct {
	// Deployment is the desired state with operator changes (pause, scale,
	// undo, restart) applied and the status of the last sync.
	Deployment     appsv1.Deployment `json:"deployment"`
	StableRevision int64             `json:"stableRevision"`
	Outcome        string            `json:"outcome,omitempty"`
	UndoneTo       int64             `json:"undoneTo,omitempty"`
	Canary         *CanaryState      `json:"canary,omitempty"`
	BlueGreen      *BlueGreenState   `json:"blueGreen,omitempty"`
	// ParentLease is the lease whose workflow started the first run as
	// its child ("" for a standalone rollout).
	ParentLease string `json:"parentLease,omitempty"`
}

// desired returns the Deployment with the API server's defaults applied, as
// upstream's controller would see it, and validates it. Errors name the field
// and the fix.
func (in rolloutInput) desired() (*appsv1.Deployment, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if msgs := validation.IsDNS1123Label(in.Namespace); len(msgs) > 0 {
		bad("namespace", "%q is not a valid namespace name (%s)", in.Namespace, msgs[0])
	}
	if msgs := validation.IsDNS1035Label(in.Service); len(msgs) > 0 {
		bad("service", "%q is not a valid service name: use lower-case letters, digits and '-', starting with a letter (%s)", in.Service, msgs[0])
	}
	if d := in.ScaleDownDelaySeconds; d < 0 || d > manifest.MaxScaleDownDelaySeconds {
		bad("scaleDownDelaySeconds", "%d: want 0 to %d seconds", d, manifest.MaxScaleDownDelaySeconds)
	}
	if n := len(in.TrafficRoutes); n > api.MaxTrafficRoutes {
		bad("trafficRoutes", "%d routes: at most %d (one per HTTP port of the service)", n, api.MaxTrafficRoutes)
	}
	for i, name := range in.TrafficRoutes {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			bad(fmt.Sprintf("trafficRoutes[%d]", i), "%q is not a valid HTTPRoute name (%s)", name, msgs[0])
		}
	}
	d := in.Deployment.DeepCopy()
	if in.Carry != nil {
		d = in.Carry.Deployment.DeepCopy()
	}
	if d.Name == "" {
		d.Name = in.Service
	}
	if d.Namespace == "" {
		d.Namespace = in.Namespace
	}
	if d.Name != in.Service {
		bad("deployment.metadata.name", "%q differs from service %q: omit it or make them equal", d.Name, in.Service)
	}
	if d.Namespace != in.Namespace {
		bad("deployment.metadata.namespace", "%q differs from namespace %q: omit it or make them equal", d.Namespace, in.Namespace)
	}
	spec := &d.Spec
	if spec.Template.Labels == nil {
		spec.Template.Labels = map[string]string{"app": in.Service}
	}
	if spec.Selector == nil {
		spec.Selector = &metav1.LabelSelector{MatchLabels: spec.Template.Labels}
	}
	if spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType && spec.Strategy.RollingUpdate != nil {
		bad("deployment.spec.strategy.rollingUpdate", "must be omitted when type is Recreate")
	}
	rollout.SetDeploymentDefaults(d)

	if *spec.Replicas < 0 {
		bad("deployment.spec.replicas", "%d is negative: use 0 or more", *spec.Replicas)
	}
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err != nil {
		bad("deployment.spec.selector", "%v", err)
	} else if sel.Empty() {
		bad("deployment.spec.selector", "is empty: omit it to select the template's labels")
	} else if !sel.Matches(labels.Set(spec.Template.Labels)) {
		bad("deployment.spec.selector", "does not match deployment.spec.template.metadata.labels: the pods would not belong to the ReplicaSet")
	}
	if len(spec.Template.Spec.Containers) == 0 {
		bad("deployment.spec.template.spec.containers", "is empty: give at least one container with a name and an image")
	}
	for i, c := range spec.Template.Spec.Containers {
		if c.Name == "" {
			bad(fmt.Sprintf("deployment.spec.template.spec.containers[%d].name", i), "is empty")
		}
		if c.Image == "" {
			bad(fmt.Sprintf("deployment.spec.template.spec.containers[%d].image", i), "is empty: give an image reference like nginx:1.27")
		}
	}
	switch spec.Strategy.Type {
	case appsv1.RollingUpdateDeploymentStrategyType:
		ru := spec.Strategy.RollingUpdate
		for _, f := range []struct {
			name string
			v    *intstr.IntOrString
		}{{"maxSurge", ru.MaxSurge}, {"maxUnavailable", ru.MaxUnavailable}} {
			if _, err := intstr.GetScaledValueFromIntOrPercent(f.v, 100, true); err != nil || (f.v.Type == intstr.Int && f.v.IntVal < 0) {
				bad("deployment.spec.strategy.rollingUpdate."+f.name, "%q: want a non-negative integer or a percentage like 25%%", f.v.String())
			}
		}
		if isZero(ru.MaxSurge) && isZero(ru.MaxUnavailable) {
			bad("deployment.spec.strategy.rollingUpdate", "maxSurge and maxUnavailable are both 0: the rollout could never progress; make one of them positive")
		}
	case appsv1.RecreateDeploymentStrategyType:
	default:
		bad("deployment.spec.strategy.type", "%q: want RollingUpdate or Recreate", spec.Strategy.Type)
	}
	if spec.MinReadySeconds < 0 {
		bad("deployment.spec.minReadySeconds", "%d is negative", spec.MinReadySeconds)
	}
	if *spec.RevisionHistoryLimit < 0 {
		bad("deployment.spec.revisionHistoryLimit", "%d is negative", *spec.RevisionHistoryLimit)
	}
	if in.MaxHistoryEvents < 0 || in.MaxHistoryEvents > 0 && in.MaxHistoryEvents < minHistoryEvents {
		bad("maxHistoryEvents", "%d: give 0 (the default, %d) or at least %d", in.MaxHistoryEvents, flow.ContinueAsNewAfter, minHistoryEvents)
	}
	if *spec.ProgressDeadlineSeconds <= spec.MinReadySeconds {
		bad("deployment.spec.progressDeadlineSeconds", "%d must be greater than minReadySeconds (%d)", *spec.ProgressDeadlineSeconds, spec.MinReadySeconds)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return d, nil
}

func isZero(v *intstr.IntOrString) bool {
	n, err := intstr.GetScaledValueFromIntOrPercent(v, 100, true)
	return err == nil && n == 0
}
