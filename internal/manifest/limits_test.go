package manifest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 20.4: an operator's limits on one lease. Before them, one manifest
// with 254 expose.ip endpoints took the whole default /24 pool, and an
// analysis of interval 1ns and count 1000000 was accepted. Each case is
// refused naming the field and the limit.
func TestManifestsOverTheOperatorsLimitsAreRefusedNamingTheField(t *testing.T) {
	one := int32(1)
	svc := func(name string) Service { return Service{Name: name, Image: "nginx:1.27", Replicas: &one} }
	manyIPs := svc("web")
	for i := range 254 {
		manyIPs.Ports = append(manyIPs.Ports, Port{Port: int32(1000 + i), Expose: &Expose{IP: fmt.Sprintf("ip%d", i)}})
	}
	manyHosts := svc("web")
	manyHosts.Ports = []Port{{Port: 80, Expose: &Expose{HTTP: &HTTPExpose{}}}}
	for i := range 17 {
		manyHosts.Ports[0].Expose.HTTP.Hostnames = append(manyHosts.Ports[0].Expose.HTTP.Hostnames, fmt.Sprintf("h%d.example.com", i))
	}
	var services []Service
	for i := range 17 {
		services = append(services, svc(fmt.Sprintf("s%d", i)))
	}
	big := svc("web")
	n := int32(65)
	big.Replicas = &n
	steps := svc("web")
	steps.Rollout = &Rollout{Strategy: StrategyCanary}
	for range 33 {
		w := int32(10)
		steps.Rollout.Steps = append(steps.Rollout.Steps, CanaryStep{SetWeight: &w})
	}
	fast := svc("web")
	fast.Rollout = &Rollout{Strategy: StrategyCanary, Steps: []CanaryStep{{Analysis: &Analysis{
		Prometheus: &PrometheusQuery{Query: "up"}, SuccessCondition: "result == 1", Interval: "1ns", Count: 1000000,
	}}}}
	for _, tc := range []struct {
		name     string
		services []Service
		want     []string
	}{
		{"254 IP endpoints", []Service{manyIPs}, []string{"services[0].ports[4].expose.ip: 254 declared IP endpoints", "at most 4", "--max-ip-endpoints", "services[0].ports: 254 ports"}},
		{"17 hostnames", []Service{manyHosts}, []string{"services[0].ports[0].expose.http.hostnames[16]: 17 hostnames", "at most 16"}},
		{"17 services", services, []string{"services: 17 services", "at most 16"}},
		{"65 replicas", []Service{big}, []string{"services[*].replicas: 65 replicas in all", "at most 64"}},
		{"33 canary steps", []Service{steps}, []string{"services[0].rollout.steps: 33 steps", "at most 32"}},
		{"an analysis every 1ns, 1000000 times", []Service{fast}, []string{
			"services[0].rollout.steps[0].analysis.interval: 1ns", "at most every 1s",
			"services[0].rollout.steps[0].analysis.count: 1000000 measurements", "at most 1000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manifest{Lease: "a", Services: tc.services}
			err := m.CheckLimits(Limits{})
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestTheOperatorSetsTheLimits(t *testing.T) {
	one := int32(1)
	m := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx:1.27", Replicas: &one,
		Ports: []Port{{Port: 80, Expose: &Expose{IP: "a"}}, {Port: 81, Expose: &Expose{IP: "b"}}}}}}
	assert.NoError(t, m.CheckLimits(Limits{}), "within the defaults")
	err := m.CheckLimits(Limits{IPEndpoints: 1})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "services[0].ports[1].expose.ip: 2 declared IP endpoints"), err.Error())
	assert.NoError(t, m.CheckLimits(Limits{IPEndpoints: 2, MinInterval: time.Second}))
}

// Issue 20.3 with an operator's own namespace label: a query selecting by
// --prometheus-namespace-label is refused before anything is written,
// naming the field. Before, validation checked only the label "namespace",
// and such a query was accepted and then inconclusive at every
// measurement.
func TestAQuerySelectingByTheOperatorsNamespaceLabelIsRefused(t *testing.T) {
	one := int32(1)
	m := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx:1.27", Replicas: &one,
		Rollout: &Rollout{Strategy: StrategyCanary, Steps: []CanaryStep{{Pause: &Pause{}}}, Analysis: &Analysis{
			Prometheus: &PrometheusQuery{Query: `sum(rate(http_requests_total{kubernetes_namespace="lease-b"}[1m]))`}, SuccessCondition: "result < 1"}}}}}
	require.NoError(t, m.Validate(), "the default label is not selected")
	assert.NoError(t, m.CheckLimits(Limits{}))
	err := m.CheckLimits(Limits{PrometheusLabel: "kubernetes_namespace"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "services[0].rollout.analysis.prometheus.query:")
	assert.Contains(t, err.Error(), "selects by kubernetes_namespace")
}

// Issue 20.5: a tenant's pod labels and annotations (and its analysis
// Jobs' pod annotations) may not use a reserved prefix: an AppArmor
// profile turned off, a mesh's sidecar skipped, deployflow's own service
// label. Before, every key was copied onto the pods.
func TestReservedKeysAreRefusedNamingTheField(t *testing.T) {
	one := int32(1)
	m := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx:1.27", Replicas: &one,
		PodLabels:      map[string]string{"deployflow.dev/service": "api", "example.com/tier": "web", "app.kubernetes.io/name": "shop"},
		PodAnnotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/web": "unconfined", "sidecar.istio.io/inject": "false", "kubectl.kubernetes.io/restartedAt": "2026-11-25T00:00:00Z"},
		Rollout: &Rollout{Strategy: StrategyCanary, Steps: []CanaryStep{{Analysis: &Analysis{Job: &JobCheck{Image: "busybox:1.36",
			PodAnnotations: map[string]string{"seccomp.security.alpha.kubernetes.io/pod": "unconfined", "deployflow.dev/ready-after": "1s"}}}}}}}}}
	err := m.CheckReservedKeys(nil, []string{"deployflow.dev/ready-after"})
	require.Error(t, err)
	for _, want := range []string{
		`services[0].podLabels["deployflow.dev/service"]: the prefix deployflow.dev is reserved`,
		`services[0].podAnnotations["container.apparmor.security.beta.kubernetes.io/web"]: the prefix kubernetes.io is reserved`,
		`services[0].podAnnotations["sidecar.istio.io/inject"]: the prefix istio.io is reserved`,
		`services[0].rollout.steps[0].analysis.job.podAnnotations["seccomp.security.alpha.kubernetes.io/pod"]`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	for _, allowed := range []string{"app.kubernetes.io/name", "restartedAt", "ready-after"} {
		assert.NotContains(t, err.Error(), allowed)
	}
	assert.NoError(t, m.CheckReservedKeys([]string{"example.org"}, []string{"deployflow.dev/", "container.apparmor.security.beta.kubernetes.io/", "sidecar.istio.io/", "example.com/", "seccomp.security.alpha.kubernetes.io/pod"}),
		"the operator's lists: no reserved prefix but example.org, and these keys and prefixes allowed")
}

// Issue 35.5: pod keys are an allowlist. Before, any prefix that was not
// reserved reached the pods: a network plugin's IP pinning and extra
// attachments, a node agent's eviction pin, a scraper's opt-in. A key
// without a prefix is the tenant's own; a prefixed one needs the
// operator's word, by key or by prefix, and a prefix allowed never opens
// a reserved one.
func TestPrefixedPodKeysNeedTheOperatorsWord(t *testing.T) {
	one := int32(1)
	m := &Manifest{Lease: "a", Services: []Service{{Name: "web", Image: "nginx:1.27", Replicas: &one,
		PodLabels: map[string]string{"tier": "web", "example.com/team": "shop"},
		PodAnnotations: map[string]string{
			"cni.projectcalico.org/ipAddrs":                  `["10.0.0.7"]`,
			"k8s.v1.cni.cncf.io/networks":                    "host-net",
			"cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
			"prometheus.io/scrape":                           "true",
			"owner":                                          "team-a",
		}}}}
	err := m.CheckReservedKeys(nil, nil)
	require.Error(t, err)
	for _, want := range []string{
		`services[0].podAnnotations["cni.projectcalico.org/ipAddrs"]: the prefix cni.projectcalico.org is not one tenants may use`,
		`services[0].podAnnotations["k8s.v1.cni.cncf.io/networks"]: the prefix k8s.v1.cni.cncf.io is not one tenants may use`,
		`services[0].podAnnotations["cluster-autoscaler.kubernetes.io/safe-to-evict"]: the prefix kubernetes.io is reserved`,
		`services[0].podAnnotations["prometheus.io/scrape"]: the prefix prometheus.io is not one tenants may use (it may steer the network plugin, a node agent or a scraper): use a key without a prefix, such as scrape, or ask the operator to allow prometheus.io/ (--allow-pod-keys)`,
		`services[0].podLabels["example.com/team"]`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), `"tier"`, "a key without a prefix is the tenant's own")
	assert.NotContains(t, err.Error(), `"owner"`)

	err = m.CheckReservedKeys(nil, []string{"example.com/", "Prometheus.io/", "kubernetes.io/", "k8s.v1.cni.cncf.io/networks"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cni.projectcalico.org/ipAddrs", "still not allowed")
	assert.Contains(t, err.Error(), "cluster-autoscaler.kubernetes.io/safe-to-evict", "a prefix allowed never opens a reserved one")
	for _, allowed := range []string{"example.com/team", "prometheus.io/scrape", "k8s.v1.cni.cncf.io/networks"} {
		assert.NotContains(t, err.Error(), allowed)
	}
}

// Issue 35.5: each port exposed on an IP endpoint takes one of the
// cluster's NodePorts (a port of the endpoint's LoadBalancer Service), a
// range every lease shares. A manifest needing more than the lease's quota
// is refused before anything is written, naming the first port past it;
// before, the API server refused the LoadBalancer Service mid-apply.
func TestPortsOnIPEndpointsAreBoundedByTheNodePortQuota(t *testing.T) {
	one := int32(1)
	m := &Manifest{Lease: "a"}
	for i := range 3 {
		s := Service{Name: fmt.Sprintf("s%d", i), Image: "nginx:1.27", Replicas: &one}
		for j := range 6 {
			s.Ports = append(s.Ports, Port{Port: int32(1000 + 10*i + j), Expose: &Expose{IP: "public"}})
		}
		m.Services = append(m.Services, s)
	}
	err := m.CheckLimits(Limits{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "services[2].ports[4].expose.ip: 18 ports exposed on IP endpoints (each takes a NodePort of the cluster's shared range): this provider allows at most 16 per lease (the operator's --lease-quota-nodeports)")
	assert.NoError(t, m.CheckLimits(Limits{NodePorts: 18}))

	// A quota of none (--lease-quota-nodeports 0) refuses the first port;
	// before, 0 read as unset and 16 were allowed.
	err = m.CheckLimits(Limits{NodePorts: NoNodePorts})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "services[0].ports[0].expose.ip: 18 ports exposed on IP endpoints (each takes a NodePort of the cluster's shared range): this provider allows at most 0 per lease")
}
