package manifest

import (
	"errors"
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

// svcYAML is a valid one-service manifest with extra lines added to the
// service (indented by 4).
func svcYAML(extra string) string {
	return "lease: shop\nservices:\n  - name: web\n    image: nginx:1.27\n" + extra
}

// portYAML is svcYAML with one port whose extra lines are indented by 8.
func portYAML(extra string) string {
	return svcYAML("    ports:\n      - port: 80\n" + extra)
}

var badCases = []badCase{
	// The manifest itself.
	{name: "empty input", in: "", fragment: "the manifest is empty", plain: true},
	{name: "only comments", in: "# nothing\n---\n", fragment: "the manifest is empty", plain: true},
	{name: "two documents", in: svcYAML("") + "---\n" + svcYAML(""), fragment: "holds 2 YAML documents: give exactly one manifest", plain: true},
	{name: "list at top level", in: "- lease: shop\n", fragment: "must be a mapping with lease and services, not a list", plain: true},
	{name: "scalar at top level", in: "shop", fragment: "must be a mapping", plain: true},
	{name: "bad YAML", in: "lease: shop\n services: x\n", fragment: "not valid YAML", plain: true},
	{name: "bad JSON", in: "{\"lease\": \"shop\",\n \"services\": [}", fragment: "not valid JSON: line 2, column", plain: true},
	{name: "trailing JSON", in: `{"lease":"shop","services":[]} {}`, fragment: "give exactly one manifest", plain: true},
	{name: "duplicate YAML key", in: "lease: a\nlease: b\nservices: []\n", fragment: `key "lease" is given twice: keep only one`, plain: true},
	{name: "duplicate JSON key", in: `{"lease":"a","services":[{"name":"web","name":"api"}]}`, path: "services[0].name", fragment: "is given twice: keep only one"},

	// Unknown fields, at every depth.
	{name: "unknown top-level field", in: "leas: shop\nlease: shop\nservices: [{name: web, image: nginx}]\n", path: "leas", fragment: "unknown field; did you mean lease?"},
	{name: "unknown service field", in: svcYAML("    imag: nginx\n"), path: "services[0].imag", fragment: "did you mean image?"},
	{name: "unknown rollout field", in: svcYAML("    rollout:\n      maxSurg: 1\n"), path: "services[0].rollout.maxSurg", fragment: "unknown field; did you mean maxSurge?"},
	{name: "unknown port field", in: portYAML("        target: 8080\n"), path: "services[0].ports[0].target", fragment: "did you mean targetPort?"},
	{name: "unknown http field", in: portYAML("        expose:\n          http:\n            hostname: [a.example.com]\n"), path: "services[0].ports[0].expose.http.hostname", fragment: "did you mean hostnames?"},
	{name: "unknown resources field", in: svcYAML("    resources: {cpus: 1}\n"), path: "services[0].resources.cpus", fragment: "did you mean cpu?"},
	{name: "field case", in: portYAML("        targetport: 8080\n"), path: "services[0].ports[0].targetport", fragment: "did you mean targetPort? (field names are case-sensitive)"},
	{name: "misplaced field", in: svcYAML("    maxSurge: 1\n"), path: "services[0].maxSurge", fragment: "belongs at services[].rollout.maxSurge"},
	{name: "misplaced hostnames", in: portYAML("        expose:\n          hostnames: [a.example.com]\n"), path: "services[0].ports[0].expose.hostnames", fragment: "belongs at services[].ports[].expose.http.hostnames"},
	{name: "unrelated field", in: svcYAML("    zzzzzz: 1\n"), path: "services[0].zzzzzz", fragment: "the fields here are args, command, env"},

	// Wrong types.
	{name: "quoted replicas", in: svcYAML("    replicas: \"3\"\n"), path: "services[0].replicas", fragment: "remove the quotes"},
	{name: "fractional replicas", in: svcYAML("    replicas: 1.5\n"), path: "services[0].replicas", fragment: "want a whole number"},
	{name: "boolean env value", in: svcYAML("    env: {DEBUG: yes}\n"), path: "services[0].env.DEBUG", fragment: "put the value in quotes"},
	{name: "number image", in: "lease: shop\nservices: [{name: web, image: 42}]\n", path: "services[0].image", fragment: "want a string, got the number 42: put the value in quotes"},
	{name: "hostnames not a list", in: portYAML("        expose: {http: {hostnames: a.example.com}}\n"), path: "services[0].ports[0].expose.http.hostnames", fragment: "write it as a list, [a.example.com]"},
	{name: "services a mapping", in: "lease: shop\nservices: {web: {image: nginx}}\n", path: "services", fragment: "want a list, got a mapping: write each entry as a list item, starting with '- '"},
	{name: "replicas out of range", in: svcYAML("    replicas: 3000000000\n"), path: "services[0].replicas", fragment: "want a whole number, got the number 3000000000, which is out of range"},
	{name: "maxSurge a list", in: svcYAML("    rollout: {maxSurge: [1]}\n"), path: "services[0].rollout.maxSurge", fragment: "want a number of pods or a percentage like 25%"},

	// Lease.
	{name: "missing lease", in: "services: [{name: web, image: nginx}]\n", path: "lease", fragment: "is required: give the lease ID"},
	{name: "bad lease", in: "lease: shop_1\nservices: [{name: web, image: nginx}]\n", path: "lease", fragment: "not a valid lease ID: use lowercase letters, digits and '-'"},
	{name: "uppercase lease", in: "lease: Shop\nservices: [{name: web, image: nginx}]\n", path: "lease", fragment: `(e.g. "shop")`},
	{name: "long lease", in: "lease: " + strings.Repeat("a", 41) + "\nservices: [{name: web, image: nginx}]\n", path: "lease", fragment: "lease IDs have at most 40"},

	// Services.
	{name: "no services", in: "lease: shop\nservices: []\n", path: "services", fragment: "is empty: list at least one service"},
	{name: "services missing", in: "lease: shop\n", path: "services", fragment: "list at least one service"},
	{name: "duplicate service", in: "lease: shop\nservices: [{name: web, image: nginx}, {name: web, image: nginx}]\n", path: "services[1].name", fragment: "already the name of services[0]: service names must be unique"},
	{name: "missing name", in: "lease: shop\nservices: [{image: nginx}]\n", path: "services[0].name", fragment: "is required: give the service a name"},
	{name: "bad name", in: "lease: shop\nservices: [{name: Web, image: nginx}]\n", path: "services[0].name", fragment: `not a valid service name: use lowercase letters, digits and '-', starting with a letter and ending with a letter or digit (e.g. "web")`},
	{name: "name starts with digit", in: "lease: shop\nservices: [{name: 1web, image: nginx}]\n", path: "services[0].name", fragment: "starting with a letter"},
	{name: "long name", in: "lease: shop\nservices: [{name: " + strings.Repeat("w", 41) + ", image: nginx}]\n", path: "services[0].name", fragment: "service names have at most 40"},

	// Images.
	{name: "missing image", in: "lease: shop\nservices: [{name: web}]\n", path: "services[0].image", fragment: "is required: give the container image, e.g. nginx:1.27"},
	{name: "uppercase image", in: "lease: shop\nservices: [{name: web, image: Nginx:1.27}]\n", path: "services[0].image", fragment: `the repository path must be lowercase ("nginx")`},
	{name: "bad tag", in: "lease: shop\nservices: [{name: web, image: 'nginx:-1'}]\n", path: "services[0].image", fragment: `the tag "-1" is invalid`},
	{name: "long tag", in: "lease: shop\nservices: [{name: web, image: 'nginx:" + strings.Repeat("t", 129) + "'}]\n", path: "services[0].image", fragment: "at most 128"},
	{name: "bad digest", in: "lease: shop\nservices: [{name: web, image: 'nginx@sha256:abc'}]\n", path: "services[0].image", fragment: "sha256: followed by 64 lowercase hex digits"},
	{name: "double slash", in: "lease: shop\nservices: [{name: web, image: 'example.com//nginx'}]\n", path: "services[0].image", fragment: "empty path component: remove the extra '/'"},
	{name: "image with space", in: "lease: shop\nservices: [{name: web, image: 'nginx 1.27'}]\n", path: "services[0].image", fragment: "contains spaces"},
	{name: "bad registry", in: "lease: shop\nservices: [{name: web, image: 'a-.example.com/nginx'}]\n", path: "services[0].image", fragment: "not a valid host[:port]"},

	// Replicas, env, resources.
	{name: "negative replicas", in: svcYAML("    replicas: -1\n"), path: "services[0].replicas", fragment: "-1 is negative: use 0 to 1000"},
	{name: "too many replicas", in: svcYAML("    replicas: 1001\n"), path: "services[0].replicas", fragment: "use at most 1000"},
	{name: "bad env key", in: svcYAML("    env: {1BAD: x}\n"), path: `services[0].env["1BAD"]`, fragment: "not a valid environment variable name: use letters, digits"},
	{name: "env key with equals", in: svcYAML("    env: {'A=B': x}\n"), path: `services[0].env["A=B"]`, fragment: "not a valid environment variable name"},
	{name: "bad cpu", in: svcYAML("    resources: {cpu: lots}\n"), path: "services[0].resources.cpu", fragment: `"lots" is not a Kubernetes quantity: write e.g. 500m or 2`},
	{name: "zero memory", in: svcYAML("    resources: {memory: 0Mi}\n"), path: "services[0].resources.memory", fragment: "must be greater than zero: write e.g. 256Mi or 1Gi"},
	{name: "negative cpu", in: svcYAML("    resources: {cpu: -1}\n"), path: "services[0].resources.cpu", fragment: `"-1" must be greater than zero`},
	{name: "negative cpu string", in: svcYAML("    resources: {cpu: '-100m'}\n"), path: "services[0].resources.cpu", fragment: "must be greater than zero"},

	// Ports.
	{name: "port out of range", in: svcYAML("    ports: [{port: 70000}]\n"), path: "services[0].ports[0].port", fragment: "70000 is out of range: use 1-65535"},
	{name: "port missing", in: svcYAML("    ports: [{targetPort: 80}]\n"), path: "services[0].ports[0].port", fragment: "is required: give the port number"},
	{name: "duplicate port", in: svcYAML("    ports: [{port: 80}, {port: 80, protocol: UDP}]\n"), path: "services[0].ports[1].port", fragment: "80 is already listed at services[0].ports[0]: list each port once"},
	{name: "target port out of range", in: svcYAML("    ports: [{port: 80, targetPort: -1}]\n"), path: "services[0].ports[0].targetPort", fragment: "use 1-65535, or leave it out"},
	{name: "lowercase protocol", in: portYAML("        protocol: tcp\n"), path: "services[0].ports[0].protocol", fragment: `want TCP or UDP (write "TCP")`},
	{name: "bad protocol", in: portYAML("        protocol: SCTP\n"), path: "services[0].ports[0].protocol", fragment: "want TCP or UDP"},

	// Exposure.
	{name: "empty expose", in: portYAML("        expose: {}\n"), path: "services[0].ports[0].expose", fragment: "give http.hostnames, an ip endpoint name, or both; or remove expose"},
	{name: "http on UDP", in: portYAML("        protocol: UDP\n        expose: {http: {hostnames: [a.example.com]}}\n"), path: "services[0].ports[0].expose.http", fragment: "needs a TCP port"},
	{name: "empty hostnames", in: portYAML("        expose: {http: {hostnames: []}}\n"), path: "services[0].ports[0].expose.http.hostnames", fragment: "is empty: list at least one host name"},
	{name: "empty hostname", in: portYAML("        expose: {http: {hostnames: ['']}}\n"), path: "services[0].ports[0].expose.http.hostnames[0]", fragment: "is empty: give a fully qualified host name"},
	{name: "wildcard hostname", in: portYAML("        expose: {http: {hostnames: [a.example.com, '*.example.com']}}\n"), path: "services[0].ports[0].expose.http.hostnames[1]", fragment: `"*.example.com": wildcard hostnames are not allowed; list each hostname`},
	{name: "uppercase hostname", in: portYAML("        expose: {http: {hostnames: [Shop.Example.com]}}\n"), path: "services[0].ports[0].expose.http.hostnames[0]", fragment: `host names must be lowercase (e.g. "shop.example.com")`},
	{name: "invalid hostname", in: portYAML("        expose: {http: {hostnames: [shop_.example.com]}}\n"), path: "services[0].ports[0].expose.http.hostnames[0]", fragment: "not a valid host name: use lowercase letters, digits, '-' and '.'"},
	{name: "hostname not fully qualified", in: portYAML("        expose: {http: {hostnames: [shop]}}\n"), path: "services[0].ports[0].expose.http.hostnames[0]", fragment: "not fully qualified: give the full name, like shop.example.com"},
	{name: "hostname too long", in: portYAML("        expose: {http: {hostnames: [" + strings.Repeat("a.", 127) + "com]}}\n"), path: "services[0].ports[0].expose.http.hostnames[0]", fragment: "host names have at most 253"},
	{name: "hostname label too long", in: portYAML("        expose: {http: {hostnames: [" + strings.Repeat("a", 64) + ".com]}}\n"), path: "services[0].ports[0].expose.http.hostnames[0]", fragment: "DNS labels have at most 63"},
	{name: "hostname trailing dot", in: portYAML("        expose: {http: {hostnames: [shop.example.com.]}}\n"), path: "services[0].ports[0].expose.http.hostnames[0]", fragment: `leave out the trailing dot: write "shop.example.com"`},
	{name: "hostname is an IP", in: portYAML("        expose: {http: {hostnames: [10.0.0.1]}}\n"), path: "services[0].ports[0].expose.http.hostnames[0]", fragment: "is an IP address"},
	{name: "duplicate hostname across services", in: "lease: shop\nservices:\n- {name: web, image: nginx, ports: [{port: 80, expose: {http: {hostnames: [a.example.com]}}}]}\n- {name: api, image: nginx, ports: [{port: 80, expose: {http: {hostnames: [a.example.com]}}}]}\n", path: "services[1].ports[0].expose.http.hostnames[0]", fragment: `"a.example.com" is already routed by services[0].ports[0].expose.http.hostnames[0]`},
	{name: "bad ip endpoint", in: portYAML("        expose: {ip: Edge_1}\n"), path: "services[0].ports[0].expose.ip", fragment: "not a valid IP endpoint name"},
	{name: "ip endpoint port taken", in: "lease: shop\nservices:\n- {name: web, image: nginx, ports: [{port: 443, expose: {ip: edge}}]}\n- {name: api, image: nginx, ports: [{port: 443, expose: {ip: edge}}]}\n", path: "services[1].ports[0].expose.ip", fragment: "port 443/TCP on IP endpoint \"edge\" is already exposed by services[0].ports[0].expose.ip: use another port or another endpoint"},
	{name: "load balancer name too long", in: portYAML("        expose: {ip: " + strings.Repeat("e", 60) + "}\n"), path: "services[0].ports[0].expose.ip", fragment: "shorten the service or endpoint name"},
	{name: "load balancer name clash", in: "lease: shop\nservices:\n- {name: web, image: nginx, ports: [{port: 443, expose: {ip: edge}}]}\n- {name: web-ip-edge, image: nginx}\n", path: "services[0].ports[0].expose.ip", fragment: "same name as services[1]: rename that service or use another endpoint name"},

	// Rollout.
	{name: "bad strategy", in: svcYAML("    rollout: {strategy: BlueGreen}\n"), path: "services[0].rollout.strategy", fragment: `"BlueGreen": want RollingUpdate or Recreate`},
	{name: "strategy case", in: svcYAML("    rollout: {strategy: recreate}\n"), path: "services[0].rollout.strategy", fragment: `(write "Recreate")`},
	{name: "maxSurge not a percentage", in: svcYAML("    rollout: {maxSurge: lots}\n"), path: "services[0].rollout.maxSurge", fragment: "neither a number nor a percentage: use a number of pods (0 or more) or a percentage"},
	{name: "maxSurge quoted number", in: svcYAML("    rollout: {maxSurge: '2'}\n"), path: "services[0].rollout.maxSurge", fragment: `write 2 without quotes for a number of pods, or "2%" for a percentage`},
	{name: "negative maxSurge", in: svcYAML("    rollout: {maxSurge: -1}\n"), path: "services[0].rollout.maxSurge", fragment: "-1 is negative"},
	{name: "negative maxUnavailable percent", in: svcYAML("    rollout: {maxUnavailable: -5%}\n"), path: "services[0].rollout.maxUnavailable", fragment: `"-5%" is negative`},
	{name: "maxUnavailable over 100%", in: svcYAML("    rollout: {maxUnavailable: 150%}\n"), path: "services[0].rollout.maxUnavailable", fragment: `"150%" is more than 100%`},
	{name: "both zero", in: svcYAML("    rollout: {maxSurge: 0, maxUnavailable: 0%}\n"), path: "services[0].rollout", fragment: "maxSurge and maxUnavailable are both 0: the rollout could never progress; make one of them positive"},
	{name: "Recreate with maxSurge", in: svcYAML("    rollout: {strategy: Recreate, maxSurge: 1}\n"), path: "services[0].rollout.maxSurge", fragment: "not allowed with strategy Recreate: remove it, or use strategy RollingUpdate"},
	{name: "Recreate with maxUnavailable", in: svcYAML("    rollout: {strategy: Recreate, maxUnavailable: 1}\n"), path: "services[0].rollout.maxUnavailable", fragment: "not allowed with strategy Recreate"},
	{name: "negative minReadySeconds", in: svcYAML("    rollout: {minReadySeconds: -1}\n"), path: "services[0].rollout.minReadySeconds", fragment: "-1 is negative: use 0 or more seconds"},
	{name: "deadline not after minReady", in: svcYAML("    rollout: {minReadySeconds: 30, progressDeadlineSeconds: 30}\n"), path: "services[0].rollout.progressDeadlineSeconds", fragment: "30 must be greater than minReadySeconds (30) and 0: raise it"},
	{name: "default deadline not after minReady", in: svcYAML("    rollout: {minReadySeconds: 900}\n"), path: "services[0].rollout.progressDeadlineSeconds", fragment: "the default, 600, is not greater than minReadySeconds (900): set progressDeadlineSeconds above"},
	{name: "negative revisionHistoryLimit", in: svcYAML("    rollout: {revisionHistoryLimit: -1}\n"), path: "services[0].rollout.revisionHistoryLimit", fragment: "-1 is negative: use 0 or more"},

	// Pod labels and annotations.
	{name: "reserved app label", in: svcYAML("    podLabels: {app: other}\n"), path: "services[0].podLabels.app", fragment: `"app" is reserved (deployflow sets it to the service name and selects pods by it): remove it`},
	{name: "reserved hash label", in: svcYAML("    podLabels: {pod-template-hash: x}\n"), path: `services[0].podLabels["pod-template-hash"]`, fragment: "is reserved"},
	{name: "reserved service label", in: svcYAML("    podLabels: {deployflow.dev/service: x}\n"), path: `services[0].podLabels["deployflow.dev/service"]`, fragment: "is reserved"},
	{name: "bad label key", in: svcYAML("    podLabels: {'-tier': x}\n"), path: `services[0].podLabels["-tier"]`, fragment: "not a valid label key: use a name of at most 63"},
	{name: "bad label value", in: svcYAML("    podLabels: {tier: 'front end'}\n"), path: "services[0].podLabels.tier", fragment: `value "front end" is not a valid label value`},
	{name: "bad annotation key", in: svcYAML("    podAnnotations: {'bad key': x}\n"), path: `services[0].podAnnotations["bad key"]`, fragment: "not a valid annotation key"},
	{name: "annotations too large", in: svcYAML("    podAnnotations: {big: " + strings.Repeat("x", 256<<10) + "}\n"), path: "services[0].podAnnotations", fragment: "shorten or remove some"},
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
