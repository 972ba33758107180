package manifest

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestValidateAcceptsTheHappyManifest(t *testing.T) {
	require.NoError(t, happyManifest().Validate())
	require.NoError(t, happyManifest().WithDefaults().Validate())
}

func TestValidateReturnsAllProblems(t *testing.T) {
	m := &Manifest{Lease: "shop", Services: []Service{
		{Name: "web", Image: "nginx", Replicas: ptr[int32](-1)},
		{Name: "web", Image: "", Ports: []Port{{Port: 80}}},
	}}
	err := m.Validate()
	var verr *ValidationError
	require.True(t, errors.As(err, &verr), "%v", err)
	assert.Equal(t, []Problem{
		{Path: "services[0].replicas", Message: "-1 is negative: use 0 to 1000 (0 stops the service)"},
		{Path: "services[1].name", Message: `"web" is already the name of services[0]: service names must be unique; rename one of them`},
		{Path: "services[1].image", Message: "is required: give the container image, " + imageExample},
	}, verr.Problems)
	assert.Equal(t,
		"services[0].replicas: -1 is negative: use 0 to 1000 (0 stops the service)\n"+
			`services[1].name: "web" is already the name of services[0]: service names must be unique; rename one of them`+"\n"+
			"services[1].image: is required: give the container image, "+imageExample,
		err.Error())
}

func TestValidateNil(t *testing.T) {
	var m *Manifest
	err := m.Validate()
	require.Error(t, err)
	assert.Equal(t, "the manifest is empty: give lease and services", err.Error())
}

func TestValidateRollout(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	for _, tc := range []struct {
		name    string
		rollout Rollout
		want    string // "" for valid, else a fragment of the one problem
	}{
		{"defaults", Rollout{}, ""},
		{"zero surge, default unavailable", Rollout{MaxSurge: num(0)}, ""},
		{"zero unavailable, default surge", Rollout{MaxUnavailable: pct("0%")}, ""},
		{"100% surge", Rollout{MaxSurge: pct("100%")}, ""},
		{"surge above replicas", Rollout{MaxSurge: num(50)}, ""},
		{"both zero, mixed forms", Rollout{MaxSurge: pct("00%"), MaxUnavailable: num(0)}, "both 0"},
		{"101% surge", Rollout{MaxSurge: pct("101%")}, "more than 100%"},
		{"huge percent", Rollout{MaxSurge: pct("99999999999999999999%")}, "more than 100%"},
		{"percent with space", Rollout{MaxSurge: pct("25 %")}, "neither a number nor a percentage"},
		{"empty string", Rollout{MaxUnavailable: pct("")}, "neither a number nor a percentage"},
		{"deadline zero", Rollout{ProgressDeadlineSeconds: ptr[int32](0)}, "must be greater than minReadySeconds (0)"},
		{"deadline after minReady", Rollout{MinReadySeconds: 700, ProgressDeadlineSeconds: ptr[int32](701)}, ""},
		{"recreate", Rollout{Strategy: "Recreate"}, ""},
		{"zero history", Rollout{RevisionHistoryLimit: ptr[int32](0)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rollout
			m := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx", Rollout: &r}}}
			err := m.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				require.NoError(t, m.WithDefaults().Validate())
				return
			}
			var verr *ValidationError
			require.True(t, errors.As(err, &verr), "%v", err)
			require.Len(t, verr.Problems, 1, "%v", err)
			assert.Contains(t, verr.Problems[0].Message, tc.want)
		})
	}
}

func TestValidateLoadBalancerNameClashBetweenEndpoints(t *testing.T) {
	m := &Manifest{Lease: "a", Services: []Service{
		{Name: "a", Image: "nginx", Ports: []Port{{Port: 1, Expose: &Expose{IP: "ip-b"}}}},
		{Name: "a-ip", Image: "nginx", Ports: []Port{{Port: 2, Expose: &Expose{IP: "b"}}}},
	}}
	err := m.Validate()
	require.Error(t, err)
	assert.Equal(t, `services[1].ports[0].expose.ip: the LoadBalancer Service for it would be named "a-ip-ip-b", like the one for services[0].ports[0].expose.ip (service "a", endpoint "ip-b"): rename the service or the endpoint`, err.Error())
}

func TestValidateAllowsSharingAnEndpointOnDifferentPorts(t *testing.T) {
	m := &Manifest{Lease: "a", Services: []Service{
		{Name: "web", Image: "nginx", Ports: []Port{{Port: 443, Expose: &Expose{IP: "edge"}}, {Port: 53, Protocol: "UDP", Expose: &Expose{IP: "edge"}}}},
		{Name: "dns", Image: "nginx", Ports: []Port{{Port: 53, Expose: &Expose{IP: "edge"}}}},
	}}
	require.NoError(t, m.Validate())
}

func TestImageProblem(t *testing.T) {
	for _, ok := range []string{
		"nginx",
		"nginx:1.27",
		"nginx:latest",
		"library/nginx",
		"docker.io/library/nginx:1.27",
		"registry.example.com:5000/team/app:v2",
		"localhost/app",
		"localhost:5000/app",
		"a.b/c.d/e_f/g__h/i-j/k---l:TAG_1.x-y",
		"nginx@" + digest,
		"nginx:1.27@" + digest,
		"[::1]:5000/app:1",
		"Registry.Example.com/app",
		"nginx:" + strings.Repeat("t", 128),
	} {
		assert.Empty(t, imageProblem(ok), ok)
	}
	for ref, want := range map[string]string{
		"":                 "is required",
		"nginx:":           "the tag \"\" is invalid",
		"nginx:.x":         "the tag",
		"nginx@sha256:ABC": "digest",
		"nginx@sha512:" + strings.Repeat("a", 128): "digest",
		"nginx@" + digest + "x":                    "digest",
		"Nginx":                                    "must be lowercase",
		"team/Nginx":                               "must be lowercase",
		"/nginx":                                   "empty path component",
		"nginx/":                                   "empty path component",
		"a..b/c":                                   "not a valid host",
		"example.com:port/app":                     "not a valid host",
		"nginx_/x":                                 "path component",
		"-nginx":                                   "path component",
		"a/b\tc":                                   "spaces or control characters",
		"x.io/" + strings.Repeat("a", 255):         "image names have at most 255",
		":1.27":                                    "no repository name",
		"@" + digest:                               "no repository name",
		"nginx:1:2":                                "must be lowercase",
	} {
		got := imageProblem(ref)
		if !assert.NotEmpty(t, got, ref) {
			continue
		}
		if ref == "nginx:1:2" {
			// The tag is "2" and the name "nginx:1", which is not a path.
			assert.Contains(t, got, "path component", ref)
			continue
		}
		assert.Contains(t, got, want, ref)
	}
}

func TestHostnameProblem(t *testing.T) {
	for _, ok := range []string{"a.io", "www.shop.example.com", "xn--bcher-kva.example", "1.example.com", strings.Repeat("a", 63) + ".com"} {
		assert.Empty(t, hostnameProblem(ok), ok)
	}
	for host, want := range map[string]string{
		"":                   "is empty",
		"*":                  "wildcard",
		"*.example.com":      "wildcard",
		"a.*.com":            "wildcard",
		"Example.com":        "lowercase",
		"EXAMPLE_.com":       "lowercase",
		"example":            "not fully qualified",
		"localhost":          "not fully qualified",
		"-a.example.com":     "not a valid host name",
		"a..example.com":     "not a valid host name",
		"a b.com":            "not a valid host name",
		"example.com.":       "trailing dot",
		"192.168.1.1":        "is an IP address",
		"::1":                "is an IP address",
		"http://example.com": "not a valid host name",
	} {
		assert.Contains(t, hostnameProblem(host), want, host)
	}
}

func TestProblemPaths(t *testing.T) {
	assert.Equal(t, "a.b", field("a", "b"))
	assert.Equal(t, "b", field("", "b"))
	assert.Equal(t, "a[3]", index("a", 3))
	assert.Equal(t, "env.LOG_LEVEL", key("env", "LOG_LEVEL"))
	assert.Equal(t, `podLabels["example.com/tier"]`, key("podLabels", "example.com/tier"))
	assert.Equal(t, `x["a\"b"]`, key("x", `a"b`))
}

// Issue 35.1: the rules before issue 20 compile a condition with expr's
// full parser, which recurses once per nesting level: some hundred
// thousand "(" overflowed the worker's stack. Those rules read only state
// a run carries, and bound a condition's length first (16 times today's
// 256 bytes): the deepest nesting that fits compiles or is refused, in
// either case returning, and a longer one is refused unparsed.
func TestTheLegacyConditionCompileIsBoundedBeforeTheParserReadsIt(t *testing.T) {
	half := (legacyConditionLength - len("result < 1")) / 2
	deepest := strings.Repeat("(", half) + "result < 1" + strings.Repeat(")", half)
	require.LessOrEqual(t, len(deepest), legacyConditionLength)
	assert.NoError(t, legacyCompileCondition(deepest), "the deepest nesting within the bound compiles, and returns")
	assert.Error(t, legacyCompileCondition(strings.Repeat("!", legacyConditionLength)+"true"), "within the bound, a condition that is not one is refused")

	for _, long := range []string{strings.Repeat("(", 300000) + "result < 1" + strings.Repeat(")", 300000), strings.Repeat("!", 900000) + "true"} {
		err := legacyCompileCondition(long)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "bytes long: a condition is at most 256")
	}
	m := Manifest{Lease: "shop", Services: []Service{{Name: "web", Image: "nginx:1.27", Rollout: &Rollout{Strategy: StrategyCanary,
		Steps: []CanaryStep{{Analysis: &Analysis{Prometheus: &PrometheusQuery{Query: "vector(1)"}, SuccessCondition: strings.Repeat("!", 200000) + "true"}}}}}}}
	err := m.ValidateLenient()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "services[0].rollout.steps[0].analysis.successCondition")
}

// Issue 35.5: a service's revisionHistoryLimit was unbounded, so a tenant
// redeploying kept every old ReplicaSet in etcd. Its Deployment keeps at
// most 50 (the lease's ReplicaSet quota holds them too), and the manifest
// is not refused for it: a lease's own manifest of before the bound must
// not be refused on its way back.
func TestARevisionHistoryIsBounded(t *testing.T) {
	m := happyManifest()
	m.Services[0].Rollout = &Rollout{RevisionHistoryLimit: ptr[int32](1000000)}
	require.NoError(t, m.Validate())
	d, err := m.Deployment(m.Services[0].Name)
	require.NoError(t, err)
	assert.Equal(t, MaxRevisionHistoryLimit, *d.Spec.RevisionHistoryLimit)
	m.Services[0].Rollout.RevisionHistoryLimit = ptr[int32](7)
	d, err = m.Deployment(m.Services[0].Name)
	require.NoError(t, err)
	assert.Equal(t, int32(7), *d.Spec.RevisionHistoryLimit)
}

// Review of issue 35: a lease's scale may take a blue-green service below
// its previewReplicaCount (the preview is clamped to the replicas), and
// its manifest is then carried so. Under the rules of its day it is still
// valid: the lease's next run, and the rollouts returning to it, must not
// be refused for it. A manifest sent today is held to the bound.
func TestAPreviewAboveAScaledServicesReplicasIsValidUnderTheRulesOfItsDay(t *testing.T) {
	m := happyManifest()
	m.Services[0].Replicas = ptr[int32](2)
	m.Services[0].Rollout = &Rollout{Strategy: StrategyBlueGreen, BlueGreen: &BlueGreen{PreviewReplicaCount: ptr[int32](3)}}
	err := m.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "services[0].rollout.blueGreen.previewReplicaCount: 3: want 1 to the service's replicas (2)")
	assert.NoError(t, m.ValidateLenient())
	assert.NoError(t, ValidateRolloutAnalyses(nil, nil, m.Services[0].Rollout.BlueGreen, 2, true), "a lease's own rollout of it")
}

// Review of issue 35: a rollout started by hand had no lease's plan to
// hold its analyses to the operator's limits: an interval of 1ms and a
// million measurements passed. The default limits hold them.
func TestAHandStartedRolloutsAnalysesAreHeldToTheDefaultLimits(t *testing.T) {
	fast := &Analysis{Prometheus: &PrometheusQuery{Query: "up"}, SuccessCondition: "result == 1", Interval: "1ms", Count: 1000000}
	err := ValidateRolloutAnalyses([]CanaryStep{{SetWeight: ptr[int32](50)}, {Analysis: fast}}, fast, nil, 4, false)
	require.Error(t, err)
	for _, want := range []string{"steps[1].analysis.interval: 1ms", "steps[1].analysis.count: 1000000", "background.interval: 1ms"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NoError(t, ValidateRolloutAnalyses([]CanaryStep{{Analysis: fast}}, nil, nil, 4, true), "a lease's own: its plan held it to the operator's")
}
