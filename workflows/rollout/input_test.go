package rollout

import (
	"testing"

	"github.com/deployflow/deployflow/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func validInput() api.RolloutInput {
	return api.RolloutInput{Namespace: "shop", Service: "web", Deployment: appsv1.Deployment{
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
		}},
	}}
}

func TestDesiredAppliesUpstreamDefaults(t *testing.T) {
	d, err := rolledOut(validInput()).desired()
	require.NoError(t, err)
	assert.Equal(t, "web", d.Name)
	assert.Equal(t, "shop", d.Namespace)
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Equal(t, map[string]string{"app": "web"}, d.Spec.Template.Labels)
	assert.Equal(t, map[string]string{"app": "web"}, d.Spec.Selector.MatchLabels)
	assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
	assert.Equal(t, "25%", d.Spec.Strategy.RollingUpdate.MaxSurge.String())
	assert.Equal(t, "25%", d.Spec.Strategy.RollingUpdate.MaxUnavailable.String())
	assert.Equal(t, int32(10), *d.Spec.RevisionHistoryLimit)
	assert.Equal(t, int32(600), *d.Spec.ProgressDeadlineSeconds)
}

func TestDesiredRejectsBadInputNamingTheField(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }
	tests := []struct {
		name   string
		mutate func(*api.RolloutInput)
		want   string
	}{
		{"bad namespace", func(in *api.RolloutInput) { in.Namespace = "Shop_1" }, "namespace: \"Shop_1\" is not a valid namespace name"},
		{"too many traffic routes", func(in *api.RolloutInput) { in.TrafficRoutes = make([]string, 17) }, "trafficRoutes: 17 routes: at most 16"},
		{"a traffic route's bad name", func(in *api.RolloutInput) { in.TrafficRoutes = []string{"web-80", "../x"} }, "trafficRoutes[1]: \"../x\" is not a valid HTTPRoute name"},
		{"a scale-down delay past an hour", func(in *api.RolloutInput) { in.ScaleDownDelaySeconds = 3601 }, "scaleDownDelaySeconds: 3601: want 0 to 3600 seconds"},
		{"empty service", func(in *api.RolloutInput) { in.Service = "" }, "service: \"\" is not a valid service name"},
		{"service starting with digit", func(in *api.RolloutInput) { in.Service = "1web" }, "service: \"1web\""},
		{"name mismatch", func(in *api.RolloutInput) { in.Deployment.Name = "api" }, "deployment.metadata.name: \"api\" differs from service \"web\""},
		{"namespace mismatch", func(in *api.RolloutInput) { in.Deployment.Namespace = "other" }, "deployment.metadata.namespace: \"other\" differs"},
		{"negative replicas", func(in *api.RolloutInput) { in.Deployment.Spec.Replicas = i32(-2) }, "deployment.spec.replicas: -2 is negative"},
		{"no containers", func(in *api.RolloutInput) { in.Deployment.Spec.Template.Spec.Containers = nil }, "deployment.spec.template.spec.containers: is empty"},
		{"no image", func(in *api.RolloutInput) { in.Deployment.Spec.Template.Spec.Containers[0].Image = "" }, "containers[0].image: is empty"},
		{"no container name", func(in *api.RolloutInput) { in.Deployment.Spec.Template.Spec.Containers[0].Name = "" }, "containers[0].name: is empty"},
		{"selector does not match", func(in *api.RolloutInput) {
			in.Deployment.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}
		}, "deployment.spec.selector: does not match"},
		{"tiny history budget", func(in *api.RolloutInput) { in.MaxHistoryEvents = 5 }, "maxHistoryEvents: 5: give 0 (the default, 4000) or at least 20"},
		{"bad strategy", func(in *api.RolloutInput) { in.Deployment.Spec.Strategy.Type = "BlueGreen" }, "deployment.spec.strategy.type: \"BlueGreen\": want RollingUpdate or Recreate"},
		{"bad percent", func(in *api.RolloutInput) {
			in.Deployment.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: pct("ten%")}
		}, "rollingUpdate.maxSurge: \"ten%\""},
		{"negative maxUnavailable", func(in *api.RolloutInput) {
			in.Deployment.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: num(-1)}
		}, "rollingUpdate.maxUnavailable: \"-1\""},
		{"zero surge and unavailable", func(in *api.RolloutInput) {
			in.Deployment.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: num(0), MaxUnavailable: pct("0%")}
		}, "maxSurge and maxUnavailable are both 0"},
		{"recreate with rollingUpdate", func(in *api.RolloutInput) {
			in.Deployment.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{}}
		}, "must be omitted when type is Recreate"},
		{"negative history", func(in *api.RolloutInput) { in.Deployment.Spec.RevisionHistoryLimit = i32(-1) }, "deployment.spec.revisionHistoryLimit: -1 is negative"},
		{"deadline not above minReady", func(in *api.RolloutInput) {
			in.Deployment.Spec.MinReadySeconds = 30
			in.Deployment.Spec.ProgressDeadlineSeconds = i32(30)
		}, "deployment.spec.progressDeadlineSeconds: 30 must be greater than minReadySeconds (30)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := validInput()
			tt.mutate(&in)
			_, err := rolledOut(in).desired()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestDesiredDoesNotMutateInput(t *testing.T) {
	in := validInput()
	_, err := rolledOut(in).desired()
	require.NoError(t, err)
	assert.Nil(t, in.Deployment.Spec.Replicas)
	assert.Empty(t, in.Deployment.Name)
}
