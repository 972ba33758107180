package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// happyYAML and happyJSON are the same two-service manifest.
const happyYAML = `
# The shop's lease.
lease: shop-42
requireApproval: true
services:
  - name: web
    image: registry.example.com:5000/shop/web:v1.2.3
    replicas: 3
    command: [/bin/web]
    args: ["--listen", ":8080"]
    env:
      LOG_LEVEL: debug
      API_URL: http://api:9090
      DEBUG: "true"
    resources:
      cpu: 500m
      memory: 256Mi
    ports:
      - port: 80
        targetPort: 8080
        expose:
          http:
            hostnames: [www.shop.example.com, shop.example.com]
      - port: 443
        targetPort: 8443
        expose:
          ip: edge
    rollout:
      maxSurge: 2
      maxUnavailable: 10%
      minReadySeconds: 5
    podLabels:
      tier: frontend
    podAnnotations:
      deployflow.dev/ready-after: 1s
  - name: dns
    image: coredns/coredns@` + digest + `
    ports:
      - port: 53
        protocol: UDP
        expose: {ip: edge}
      - port: 9153
    rollout:
      strategy: Recreate
      progressDeadlineSeconds: 120
      revisionHistoryLimit: 3
      autoRollback: false
`

const happyJSON = `{
	"lease": "shop-42",
	"requireApproval": true,
	"services": [
		{
			"name": "web",
			"image": "registry.example.com:5000/shop/web:v1.2.3",
			"replicas": 3,
			"command": ["/bin/web"],
			"args": ["--listen", ":8080"],
			"env": {"LOG_LEVEL": "debug", "API_URL": "http://api:9090", "DEBUG": "true"},
			"resources": {"cpu": "500m", "memory": "256Mi"},
			"ports": [
				{"port": 80, "targetPort": 8080, "expose": {"http": {"hostnames": ["www.shop.example.com", "shop.example.com"]}}},
				{"port": 443, "targetPort": 8443, "expose": {"ip": "edge"}}
			],
			"rollout": {"maxSurge": 2, "maxUnavailable": "10%", "minReadySeconds": 5},
			"podLabels": {"tier": "frontend"},
			"podAnnotations": {"deployflow.dev/ready-after": "1s"}
		},
		{
			"name": "dns",
			"image": "coredns/coredns@` + digest + `",
			"ports": [{"port": 53, "protocol": "UDP", "expose": {"ip": "edge"}}, {"port": 9153}],
			"rollout": {"strategy": "Recreate", "progressDeadlineSeconds": 120, "revisionHistoryLimit": 3, "autoRollback": false}
		}
	]
}`

func ptr[T any](v T) *T { return &v }

// happyManifest is what happyYAML and happyJSON say, as written.
func happyManifest() *Manifest {
	surge, unavail := intstr.FromInt32(2), intstr.FromString("10%")
	return &Manifest{
		Lease:           "shop-42",
		RequireApproval: true,
		Services: []Service{
			{
				Name:      "web",
				Image:     "registry.example.com:5000/shop/web:v1.2.3",
				Replicas:  ptr[int32](3),
				Command:   []string{"/bin/web"},
				Args:      []string{"--listen", ":8080"},
				Env:       map[string]string{"LOG_LEVEL": "debug", "API_URL": "http://api:9090", "DEBUG": "true"},
				Resources: &Resources{CPU: "500m", Memory: "256Mi"},
				Ports: []Port{
					{Port: 80, TargetPort: 8080, Expose: &Expose{HTTP: &HTTPExpose{Hostnames: []string{"www.shop.example.com", "shop.example.com"}}}},
					{Port: 443, TargetPort: 8443, Expose: &Expose{IP: "edge"}},
				},
				Rollout:        &Rollout{MaxSurge: &surge, MaxUnavailable: &unavail, MinReadySeconds: 5},
				PodLabels:      map[string]string{"tier": "frontend"},
				PodAnnotations: map[string]string{"deployflow.dev/ready-after": "1s"},
			},
			{
				Name:  "dns",
				Image: "coredns/coredns@" + digest,
				Ports: []Port{
					{Port: 53, Protocol: "UDP", Expose: &Expose{IP: "edge"}},
					{Port: 9153},
				},
				Rollout: &Rollout{Strategy: "Recreate", ProgressDeadlineSeconds: ptr[int32](120), RevisionHistoryLimit: ptr[int32](3), AutoRollback: ptr(false)},
			},
		},
	}
}

func TestParseYAMLAndJSONGiveTheSameManifest(t *testing.T) {
	fromYAML, err := Parse([]byte(happyYAML))
	require.NoError(t, err)
	fromJSON, err := Parse([]byte(happyJSON))
	require.NoError(t, err)
	assert.Equal(t, happyManifest(), fromYAML)
	assert.Equal(t, happyManifest(), fromJSON)
}

// goodVariants are valid manifests, for lease "a", in unusual forms.
var goodVariants = []struct{ name, in string }{
	{"leading document marker and comments", "# c\n---\nlease: a\nservices: [{name: web, image: nginx}]\n# end\n"},
	{"document end marker", "lease: a\nservices: [{name: web, image: nginx}]\n...\n"},
	{"YAML flow style", "{lease: a, services: [{name: web, image: nginx}]}"},
	{"byte order mark", "\xef\xbb\xbflease: a\nservices: [{name: web, image: nginx}]\n"},
	{"CRLF line ends", "lease: a\r\nservices:\r\n- name: web\r\n  image: nginx\r\n"},
	{"JSON with escapes", `{"lease":"a","services":[{"name":"web","image":"nginx","args":["a\/b","\u00e9"]}]}`},
	{"nulls leave fields unset", "lease: a\nservices:\n- name: web\n  image: nginx\n  replicas: null\n  rollout: ~\n"},
	{"numeric quantities", "lease: a\nservices:\n- {name: web, image: nginx, resources: {cpu: 0.5, memory: 1073741824}}\n"},
	{"percent and int rollout", "lease: a\nservices:\n- {name: web, image: nginx, rollout: {maxSurge: 100%, maxUnavailable: 0}}\n"},
	{"every image form", "lease: a\nservices:\n- {name: a, image: nginx}\n- {name: b, image: 'localhost:5000/a/b_c__d-e.f:1.0'}\n- {name: c, image: 'docker.io/library/nginx:1.27@" + digest + "'}\n- {name: d, image: '[::1]:5000/x'}\n"},
}

func TestParseAcceptsVariants(t *testing.T) {
	for _, tc := range goodVariants {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.in))
			require.NoError(t, err)
			assert.Equal(t, "a", m.Lease)
		})
	}
}

func TestParseTakesNumbersAsQuantities(t *testing.T) {
	m, err := Parse([]byte("lease: a\nservices:\n- {name: web, image: nginx, resources: {cpu: 0.5, memory: 1073741824}}\n"))
	require.NoError(t, err)
	assert.Equal(t, &Resources{CPU: "0.5", Memory: "1073741824"}, m.Services[0].Resources)
}

// badCase is a manifest Parse must reject with a problem at path whose
// message contains fragment (the fix, where there is one). plain marks
// errors that are not a *ValidationError (not YAML at all, empty, ...).
type badCase struct {
	name, in, path, fragment string
	plain                    bool
}

// badCases is the catalogue of bad manifests in testdata/bad: each file,
// and the path and message fragment its error must name (catalogue.json).
// The CLI's tests deploy every one of them too and check nothing is written.
var badCases = loadBadCases()

func loadBadCases() []badCase {
	idx, err := os.ReadFile(filepath.Join("testdata", "bad", "catalogue.json"))
	if err != nil {
		panic(err)
	}
	var entries []struct {
		File, Name, Path, Fragment string
		Plain                      bool
	}
	if err := json.Unmarshal(idx, &entries); err != nil {
		panic(err)
	}
	out := make([]badCase, 0, len(entries))
	for _, e := range entries {
		in, err := os.ReadFile(filepath.Join("testdata", "bad", e.File))
		if err != nil {
			panic(err)
		}
		out = append(out, badCase{name: e.Name, in: string(in), path: e.Path, fragment: e.Fragment, plain: e.Plain})
	}
	return out
}

func TestParseRejectsBadManifests(t *testing.T) {
	require.GreaterOrEqual(t, len(badCases), 30)
	for _, tc := range badCases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.in))
			require.Error(t, err)
			assert.Nil(t, m)
			var verr *ValidationError
			if tc.plain {
				assert.False(t, errors.As(err, &verr), "want a plain error, got %v", err)
				assert.Contains(t, err.Error(), tc.fragment)
				return
			}
			require.True(t, errors.As(err, &verr), "want a *ValidationError, got %T: %v", err, err)
			for _, p := range verr.Problems {
				if p.Path == tc.path && strings.Contains(p.Message, tc.fragment) {
					// Error() shows it as "path: message".
					assert.Contains(t, err.Error(), tc.path+": ")
					return
				}
			}
			t.Errorf("no problem at %s containing %q; got:\n%v", tc.path, tc.fragment, err)
		})
	}
}

func TestParseReportsEveryProblemAtOnce(t *testing.T) {
	in := `
lease: Shop
services:
  - name: web
    image: nginx
    replicas: -2
    ports:
      - port: 80
        expose: {http: {hostnames: ['*.example.com']}}
`
	_, err := Parse([]byte(in))
	var verr *ValidationError
	require.True(t, errors.As(err, &verr), "%v", err)
	paths := make([]string, 0, len(verr.Problems))
	for _, p := range verr.Problems {
		paths = append(paths, p.Path)
	}
	assert.Equal(t, []string{"lease", "services[0].replicas", "services[0].ports[0].expose.http.hostnames[0]"}, paths)
	assert.Len(t, strings.Split(err.Error(), "\n"), 3)
}

func TestParseReportsEveryUnknownField(t *testing.T) {
	in := "lease: shop\nleas: x\nservices:\n- {name: web, image: nginx, replica: 2, rollout: {maxSurg: 1}}\n"
	_, err := Parse([]byte(in))
	var verr *ValidationError
	require.True(t, errors.As(err, &verr), "%v", err)
	assert.Equal(t, []Problem{
		{Path: "leas", Message: "unknown field; did you mean lease?"},
		{Path: "services[0].replica", Message: "unknown field; did you mean replicas?"},
		{Path: "services[0].rollout.maxSurg", Message: "unknown field; did you mean maxSurge?"},
	}, verr.Problems)
}

func TestParseRejectsDeepNesting(t *testing.T) {
	in := `{"lease":"a","services":[{"name":"web","image":"nginx","env":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}]}`
	_, err := Parse([]byte(in))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nested more than")
}

func TestParseRejectsHugeInput(t *testing.T) {
	_, err := Parse(make([]byte, MaxSize+1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than the")
}

func TestYAMLDocuments(t *testing.T) {
	for in, want := range map[string]int{
		"":                              0,
		"# c\n":                         0,
		"a: 1\n":                        1,
		"---\na: 1\n":                   1,
		"a: 1\n---\n":                   1,
		"a: 1\n---\n# c\n":              1,
		"a: 1\n---\nb: 2\n":             2,
		"a: 1\n--- b\n":                 2,
		"a: 1\n...\n---\nb: 2\n---\n":   2,
		"a: '---'\nb: ---x\n":           1,
		"a: |\n  ---\n  text\n":         1,
		"%YAML 1.1\n---\na: 1\n":        1,
		"a: 1\r\n---\r\nb: 2\r\n":       2,
		"a: 1\n--- # comment\n":         1,
		"a: 1\n---\t{b: 2}\n--- c: 3\n": 3,
	} {
		assert.Equal(t, want, yamlDocuments([]byte(in)), "%q", in)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"maxsurg", "maxsurge", 1}, {"kitten", "sitting", 3}, {"imag", "image", 1}} {
		assert.Equal(t, tc.want, editDistance(tc.a, tc.b), "%s/%s", tc.a, tc.b)
	}
}

// Found by the hostile-tenant suite (issue 20): the strict parser had no
// schema check for int64, so any manifest giving an analysis Job's
// activeDeadlineSeconds panicked it: the CLI crashed, and a deploy
// workflow's task failed in a loop (the deploy update then failed with
// "Workflow Task in failed state"). Guards: every field kind of the
// manifest is checked.
func TestParseChecksAnInt64Field(t *testing.T) {
	in := "lease: a\nservices:\n- name: web\n  image: nginx\n  rollout:\n    strategy: Canary\n    steps:\n    - analysis: {job: {image: busybox:1.36, activeDeadlineSeconds: %s}}\n"
	m, err := Parse([]byte(fmt.Sprintf(in, "60")))
	require.NoError(t, err)
	assert.Equal(t, int64(60), *m.Services[0].Rollout.Steps[0].Analysis.Job.ActiveDeadlineSeconds)
	_, err = Parse([]byte(fmt.Sprintf(in, `"60"`)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "services[0].rollout.steps[0].analysis.job.activeDeadlineSeconds: want a whole number")
	_, err = Parse([]byte(fmt.Sprintf(in, "99999999999999999999")))
	require.Error(t, err)
}

// Review of issue 20.7: MaxSize bounds the manifest as the workflows carry
// it, JSON with <, > and & escaped to six bytes: 200 KiB of '<' in YAML is
// 1.2 MB in a continue-as-new payload.
func TestParseBoundsTheManifestAsJSON(t *testing.T) {
	in := "lease: a\nservices:\n- name: web\n  image: nginx\n  env: {X: \"" + strings.Repeat("<", 200<<10) + "\"}\n"
	require.Less(t, len(in), MaxSize)
	_, err := Parse([]byte(in))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bytes as JSON")
}
