package rollout

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// hashTemplates are the templates whose upstream hashes are recorded in
// TestComputeHashMatchesUpstream. The golden values were produced by running
// k8s.io/kubernetes v1.36.3 pkg/controller.ComputeHash on exactly these
// templates (a scratch program outside this repository).
func hashTemplates(t *testing.T) map[string]corev1.PodTemplateSpec {
	var cats corev1.PodTemplateSpec
	require.NoError(t, json.Unmarshal([]byte(catsTemplateJSON), &cats))
	i64 := func(v int64) *int64 { return &v }
	return map[string]corev1.PodTemplateSpec{
		"empty": {},
		"nginx": {
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
		},
		"nginx-new-image": {
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.28"}}},
		},
		"rich": {
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"app": "web", "tier": "frontend", "zone": "a", "b": "c"},
				Annotations: map[string]string{"checksum/config": "abc123", "prometheus.io/scrape": "true"},
			},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: i64(30),
				RestartPolicy:                 corev1.RestartPolicyAlways,
				DNSPolicy:                     corev1.DNSClusterFirst,
				SecurityContext:               &corev1.PodSecurityContext{RunAsUser: i64(1000)},
				NodeSelector:                  map[string]string{"kubernetes.io/os": "linux"},
				Containers: []corev1.Container{{
					Name:  "app",
					Image: "registry.example.com/app:v2",
					Args:  []string{"--port=8080", "--verbose"},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
					Env:   []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
					Resources: corev1.ResourceRequirements{
						Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
					},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
						PeriodSeconds: 5,
					},
				}},
			},
		},
		"cats-json": cats,
	}
}

const catsTemplateJSON = `{
    "metadata": {"labels": {"app": "cats"}},
    "spec": {
        "containers": [{
            "name": "cats",
            "image": "registry/test/cats:v0.3.0",
            "ports": [{"name": "http", "containerPort": 9077, "protocol": "TCP"}],
            "env": [{"name": "DEPLOYMENT_ENVIRONMENT", "value": "cats-stubbed-functional"}, {"name": "APP_NAME", "value": "cats"}],
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}},
            "livenessProbe": {"httpGet": {"path": "/private/status", "port": 9077, "scheme": "HTTP"}, "initialDelaySeconds": 30, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
            "terminationMessagePath": "/dev/termination-log",
            "imagePullPolicy": "IfNotPresent"
        }],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {}
    }
}`

func TestComputeHashMatchesUpstream(t *testing.T) {
	none := (*int32)(nil)
	cc := func(v int32) *int32 { return &v }
	tests := []struct {
		template       string
		collisionCount *int32
		want           string
	}{
		{"empty", none, "85748b7f68"},
		{"empty", cc(0), "777dfcd544"},
		{"empty", cc(1), "b54bc767c"},
		{"empty", cc(7), "5cc6759bbc"},
		{"empty", cc(-1), "86946576b8"},
		{"empty", cc(1048576), "6cb4cfc6"},
		{"nginx", none, "56ff5c7bd"},
		{"nginx", cc(0), "66677bb76d"},
		{"nginx", cc(1), "7cf446dcb5"},
		{"nginx", cc(7), "7495458c5"},
		{"nginx", cc(-1), "7c864b9f84"},
		{"nginx", cc(1048576), "764bfb78fb"},
		{"nginx-new-image", none, "7c8f888dbc"},
		{"nginx-new-image", cc(0), "777dd88cc5"},
		{"nginx-new-image", cc(1), "5cc65d677d"},
		{"nginx-new-image", cc(7), "b5497ff4d"},
		{"nginx-new-image", cc(-1), "6664fc768c"},
		{"nginx-new-image", cc(1048576), "6c8c8b87"},
		{"rich", none, "795dbb88bd"},
		{"rich", cc(0), "75ffcdb7dd"},
		{"rich", cc(1), "8c58d5969"},
		{"rich", cc(7), "5b77567f99"},
		{"rich", cc(-1), "cd69d9d84"},
		{"rich", cc(1048576), "85d77d799b"},
		{"cats-json", none, "5989f8b65c"},
		{"cats-json", cc(0), "77658d5797"},
		{"cats-json", cc(1), "5c98d5df64"},
		{"cats-json", cc(7), "69b8d9df6b"},
		{"cats-json", cc(-1), "598bb45c45"},
		{"cats-json", cc(1048576), "54555669"},
	}
	templates := hashTemplates(t)
	for _, tt := range tests {
		name := tt.template + "/nil"
		if tt.collisionCount != nil {
			name = fmt.Sprintf("%s/%d", tt.template, *tt.collisionCount)
		}
		t.Run(name, func(t *testing.T) {
			tpl, ok := templates[tt.template]
			require.True(t, ok)
			before := tpl.DeepCopy()
			assert.Equal(t, tt.want, ComputeHash(&tpl, tt.collisionCount))
			assert.Equal(t, before, &tpl, "template must not be modified")
		})
	}
}

// TestPodTemplateSpecHash is upstream's collision smoke test: 1000 templates
// differing only in the image version all hash differently.
func TestPodTemplateSpecHash(t *testing.T) {
	seen := map[string]int{}
	for i := 0; i < 1000; i++ {
		var tpl corev1.PodTemplateSpec
		js := strings.Replace(catsTemplateJSON, "v0.3.0", "v0."+strconv.Itoa(i)+".0", 1)
		require.NoError(t, json.Unmarshal([]byte(js), &tpl))
		h := ComputeHash(&tpl, nil)
		if prev, dup := seen[h]; dup {
			t.Fatalf("hash collision between versions %d and %d", prev, i)
		}
		seen[h] = i
	}
}

func TestComputeHashIsStableAcrossMapOrderAndPointers(t *testing.T) {
	a := hashTemplates(t)["rich"]
	b := *a.DeepCopy() // new maps and pointers, same content
	assert.Equal(t, ComputeHash(&a, nil), ComputeHash(&b, nil))
	b.Labels["tier"] = "backend"
	assert.NotEqual(t, ComputeHash(&a, nil), ComputeHash(&b, nil))
}
