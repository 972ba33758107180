package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// The hostile-tenant suite (issue 20): manifests and hand-typed inputs a
// stranger could send, on the real local stack. Each is refused before
// anything is written, naming the field, or contained: no request to a
// forbidden address, no failed workflow task, no write outside its lease.
// Meanwhile a bystander lease on the same worker keeps deploying.
func TestHostileTenants(t *testing.T) {
	// The worker allows one address besides the leases' Services: a
	// redirector the tenants point their checks at (127.0.0.2).
	forbidden := newHitCounter(t, "127.0.0.1:0", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"secret": "the worker's neighbour answered"}`))
	})
	redirector := newHitCounter(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-loopback":
			http.Redirect(w, r, "http://"+forbidden.addr+"/", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/to-localhost":
			http.Redirect(w, r, "http://localhost:"+forbidden.port()+"/", http.StatusFound)
		case "/secret":
			_, _ = w.Write([]byte(`{"token": "s3cr3t-of-the-allowed-host", "n": 1}`))
		}
	})
	dt := newDeployTestWith(t, func(a *activities.Activities) { a.HTTPCheckAllow = []string{"127.0.0.2/32"} })
	bystander := dt.lease
	heapBefore := heapInUse()
	began := time.Now()
	dt.deploy(twoServices(bystander, bystander+".apps.example.com", "nginx:1.26", nil, false))
	require.Equal(t, api.PhaseActive, dt.waitRevision(bystander, 1).Phase)
	firstDeploy := time.Since(began)

	one, three := int32(1), int32(3)
	svc := func(mut func(*manifest.Service)) manifest.Service {
		s := manifest.Service{Name: "web", Image: "nginx:1.27", Replicas: &one}
		if mut != nil {
			mut(&s)
		}
		return s
	}
	analysis := func(cond string) func(*manifest.Service) {
		return func(s *manifest.Service) {
			s.Rollout = &manifest.Rollout{Strategy: manifest.StrategyCanary, Steps: []manifest.CanaryStep{weight(50), {Analysis: &manifest.Analysis{
				Prometheus: &manifest.PrometheusQuery{Query: "up"}, SuccessCondition: cond}}}}
		}
	}
	canaryWith := func(a manifest.Analysis) func(*manifest.Service) {
		return func(s *manifest.Service) {
			if a.Prometheus == nil && a.HTTP == nil && a.Job == nil {
				a.Prometheus = &manifest.PrometheusQuery{Query: "up"}
			}
			if a.SuccessCondition == "" {
				a.SuccessCondition = "result == 1"
			}
			s.Rollout = &manifest.Rollout{Strategy: manifest.StrategyCanary, Steps: []manifest.CanaryStep{weight(50), {Analysis: &a}}}
		}
	}
	var manyIPs, manyHosts []manifest.Port
	for i := range 254 {
		manyIPs = append(manyIPs, manifest.Port{Port: int32(1000 + i), Expose: &manifest.Expose{IP: fmt.Sprintf("ip%d", i)}})
	}
	hosts := &manifest.HTTPExpose{}
	for i := range 17 {
		hosts.Hostnames = append(hosts.Hostnames, fmt.Sprintf("h%d.%s.example.com", i, testenv.ShortName("x")))
	}
	manyHosts = []manifest.Port{{Port: 80, Expose: &manifest.Expose{HTTP: hosts}}}
	var manyServices []manifest.Service
	for i := range 17 {
		manyServices = append(manyServices, manifest.Service{Name: fmt.Sprintf("s%d", i), Image: "nginx:1.27", Replicas: &one})
	}
	var manyNodePorts []manifest.Service // 3 services, 6 ports each on one IP endpoint, but one
	for i := range 3 {
		s := manifest.Service{Name: fmt.Sprintf("n%d", i), Image: "nginx:1.27", Replicas: &one}
		for j := range 6 - i/2 {
			s.Ports = append(s.Ports, manifest.Port{Port: int32(2000 + 10*i + j), Expose: &manifest.Expose{IP: "public"}})
		}
		manyNodePorts = append(manyNodePorts, s)
	}
	var manySteps []manifest.CanaryStep
	for range 33 {
		manySteps = append(manySteps, weight(10))
	}
	long := int64(100000)

	// Refused before anything is written, naming the field.
	for _, c := range []struct {
		name     string
		services []manifest.Service
		want     string
	}{
		{"a condition that allocates 10 GB (it OOM-killed the shared worker)", []manifest.Service{svc(analysis(`len(repeat(repeat("a", 100000), 100000)) > 0`))}, "services[0].rollout.steps[1].analysis.successCondition"},
		{"a condition reading the clock (nondeterministic on replay)", []manifest.Service{svc(analysis(`now().Unix() % 2 == 0`))}, "services[0].rollout.steps[1].analysis.successCondition"},
		{"a condition parsing dates", []manifest.Service{svc(analysis(`date("2026-01-01") < now()`))}, "services[0].rollout.steps[1].analysis.successCondition"},
		{"a condition building a 10^8 range", []manifest.Service{svc(analysis(`len(1..100000000) > 0`))}, "services[0].rollout.steps[1].analysis.successCondition"},
		{"a condition with a closure", []manifest.Service{svc(analysis(`all(1..1000000, # > 0)`))}, "services[0].rollout.steps[1].analysis.successCondition"},
		{"a condition over strings", []manifest.Service{svc(analysis(`"aaaa" matches "(a+)+$"`))}, "services[0].rollout.steps[1].analysis.successCondition"},
		{"a condition of 300 bytes", []manifest.Service{svc(analysis(strings.Repeat("result+", 42) + "1 > 0"))}, "services[0].rollout.steps[1].analysis.successCondition"},
		{"a condition with member access", []manifest.Service{svc(analysis(`result.String() == "1"`))}, "services[0].rollout.steps[1].analysis.successCondition"},
		{"a query of another lease's series", []manifest.Service{svc(canaryWith(manifest.Analysis{Prometheus: &manifest.PrometheusQuery{Query: `sum(rate(http_requests_total{namespace="lease-victim"}[1m]))`}}))}, "services[0].rollout.steps[1].analysis.prometheus.query"},
		{"a query over 30 days", []manifest.Service{svc(canaryWith(manifest.Analysis{Prometheus: &manifest.PrometheusQuery{Query: `max_over_time(up[30d])`}}))}, "range [30d]: at most 1h"},
		{"a subquery evaluated every millisecond for an hour", []manifest.Service{svc(canaryWith(manifest.Analysis{Prometheus: &manifest.PrometheusQuery{Query: `max_over_time(up[1h:1ms])`}}))}, "subquery step [1h:1ms]: at least 1s"},
		{"nested subqueries without a selector", []manifest.Service{svc(canaryWith(manifest.Analysis{Prometheus: &manifest.PrometheusQuery{Query: `max_over_time(max_over_time(vector(1)[10m:1s])[30m:1s])`}}))}, "subqueries evaluate their query"},
		{"a query at another time", []manifest.Service{svc(canaryWith(manifest.Analysis{Prometheus: &manifest.PrometheusQuery{Query: `up @ 1609746000`}}))}, "the @ modifier is not allowed"},
		{"an AppArmor profile turned off", []manifest.Service{svc(func(s *manifest.Service) {
			s.PodAnnotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/web": "unconfined"}
		})}, `services[0].podAnnotations["container.apparmor.security.beta.kubernetes.io/web"]: the prefix kubernetes.io is reserved`},
		{"a label in deployflow's own domain on a pod", []manifest.Service{svc(func(s *manifest.Service) { s.PodLabels = map[string]string{"deployflow.dev/owner": "mallory"} })},
			`services[0].podLabels["deployflow.dev/owner"]: the prefix deployflow.dev is reserved`},
		{"a mesh's sidecar skipped by an analysis Job", []manifest.Service{svc(canaryWith(manifest.Analysis{Job: &manifest.JobCheck{Image: "busybox:1.36", PodAnnotations: map[string]string{"sidecar.istio.io/inject": "false"}}}))},
			`services[0].rollout.steps[1].analysis.job.podAnnotations["sidecar.istio.io/inject"]: the prefix istio.io is reserved`},
		{"a pod's address pinned through the network plugin", []manifest.Service{svc(func(s *manifest.Service) {
			s.PodAnnotations = map[string]string{"cni.projectcalico.org/ipAddrs": `["10.96.0.10"]`}
		})}, `services[0].podAnnotations["cni.projectcalico.org/ipAddrs"]: the prefix cni.projectcalico.org is not one tenants may use`},
		{"a container taking the network's administration back", []manifest.Service{svc(func(s *manifest.Service) {
			s.Security = &manifest.Security{Capabilities: []string{"NET_ADMIN", "NET_RAW"}}
		})}, "services[0].security.capabilities[0]: NET_ADMIN: this provider lets a container add only [NET_BIND_SERVICE CHOWN SETUID SETGID]"},
		{"254 IP endpoints (the whole default pool)", []manifest.Service{svc(func(s *manifest.Service) { s.Ports = manyIPs })}, "declared IP endpoints"},
		{"17 hostnames", []manifest.Service{svc(func(s *manifest.Service) { s.Ports = manyHosts })}, "services[0].ports[0].expose.http.hostnames[16]: 17 hostnames"},
		{"17 NodePorts of the cluster's shared range", manyNodePorts, "17 ports exposed on IP endpoints"},
		{"17 services", manyServices, "services: 17 services"},
		{"65 replicas", []manifest.Service{svc(func(s *manifest.Service) { n := int32(65); s.Replicas = &n })}, "services[*].replicas: 65 replicas in all"},
		{"33 canary steps", []manifest.Service{svc(func(s *manifest.Service) {
			s.Rollout = &manifest.Rollout{Strategy: manifest.StrategyCanary, Steps: manySteps}
		})}, "services[0].rollout.steps: 33 steps"},
		{"an analysis every nanosecond", []manifest.Service{svc(canaryWith(manifest.Analysis{Interval: "1ns"}))}, "services[0].rollout.steps[1].analysis.interval: 1ns"},
		{"a million measurements", []manifest.Service{svc(canaryWith(manifest.Analysis{Count: 1000000}))}, "services[0].rollout.steps[1].analysis.count: 1000000"},
		{"a petabyte of scratch disk", []manifest.Service{svc(func(s *manifest.Service) {
			s.Resources = &manifest.Resources{EphemeralStorage: "256Mi"}
			s.Volumes = []manifest.Volume{{Name: "scratch", Size: "1Pi", MountPath: "/scratch"}}
		})}, "services[0].volumes[0].size: the lease's volumes take"},
		{"a persistent volume where the provider offers none", []manifest.Service{svc(func(s *manifest.Service) {
			s.Volumes = []manifest.Volume{{Name: "data", Size: "1Gi", MountPath: "/data", Persistent: true, Class: "standard"}}
		})}, "services[0].volumes[0].persistent: this provider offers no persistent storage"},
		{"a Job running for a day", []manifest.Service{svc(canaryWith(manifest.Analysis{Job: &manifest.JobCheck{Image: "busybox:1.36", ActiveDeadlineSeconds: &long}}))}, "services[0].rollout.steps[1].analysis.job.activeDeadlineSeconds: 100000"},
	} {
		t.Run("refused/"+c.name, func(t *testing.T) {
			lease := testenv.ShortName("hostile")
			dt.createLease(lease, "mallory")
			m := manifest.Manifest{Lease: lease, Services: c.services}
			got := dt.refusal(m)
			assert.Contains(t, got, c.want)
			_, err := dt.env.Kube.CoreV1().Namespaces().Get(context.Background(), manifest.Namespace(lease), metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "nothing was written: the lease's namespace does not exist")
			reservations, err := dt.acts.IPs.Declared(context.Background(), lease)
			require.NoError(t, err)
			assert.Empty(t, reservations, "no IP of the pool was taken")
			dt.noFailedWorkflowTask(api.DeployWorkflowID(lease))
		})
	}

	// Contained: HTTP checks a tenant points at addresses that are not its
	// own. Each measurement is not made (inconclusive: one is allowed per
	// step, so the canary goes on), and nothing reaches the forbidden
	// server; an allowed host's non-numeric field is not echoed.
	t.Run("contained/http checks", func(t *testing.T) {
		lease := testenv.ShortName("hostile")
		dt.createLease(lease, "mallory")
		targets := []struct{ url, field, want string }{
			{"http://" + forbidden.addr + "/", "", "not checked: 127.0.0.1 is not in the worker's --http-check-allow CIDRs"},
			{"http://[::1]:" + forbidden.port() + "/", "", "not checked: ::1 is not in the worker's --http-check-allow CIDRs"},
			{"http://localhost:" + forbidden.port() + "/", "", "not checked: the lease has no Service localhost"},
			{"http://169.254.169.254/latest/meta-data/", "", "not checked: 169.254.169.254 is not in the worker's --http-check-allow CIDRs"},
			{"http://web." + manifest.Namespace(lease) + ".svc.attacker.example/", "", "not checked: web." + manifest.Namespace(lease) + ".svc.attacker.example is not one of the lease's Services"},
			{"http://web." + manifest.Namespace(bystander) + "/", "", "is not one of the lease's Services"},
			{"http://web." + manifest.Namespace(bystander) + ".svc.cluster.local/", "", "is not one of the lease's Services"},
			{"http://" + redirector.addr + "/to-loopback", "", "not checked: redirected: 127.0.0.1 is not in the worker's --http-check-allow CIDRs"},
			{"http://" + redirector.addr + "/to-metadata", "", "not checked: redirected: 169.254.169.254"},
			{"http://" + redirector.addr + "/to-localhost", "", "not checked: redirected: the lease has no Service localhost"},
			{"http://" + redirector.addr + "/secret", "token", "status 200: token is not a number or a boolean"},
		}
		steps := []manifest.CanaryStep{weight(50)}
		for _, tg := range targets {
			steps = append(steps, manifest.CanaryStep{Analysis: &manifest.Analysis{
				HTTP: &manifest.HTTPCheck{URL: tg.url, JSONField: tg.field}, SuccessCondition: "result == 200", Interval: "1s", InconclusiveLimit: 1,
			}})
		}
		// And a query of another tenant's series (real, and scraped): the
		// worker confines it to this lease's namespace, so it finds none.
		victim := newErrorRateTarget(t, dt.env, "lease-victim", 0.5)
		steps = append(steps, manifest.CanaryStep{Analysis: &manifest.Analysis{
			Prometheus: &manifest.PrometheusQuery{Query: victim.query()}, SuccessCondition: "result >= 0", Interval: "1s", InconclusiveLimit: 1,
		}})
		m := canaryManifest(lease, "nginx:1.26", 3, 0, steps...)
		m.Services[0].Replicas = &three
		dt.deploy(m)
		require.Equal(t, api.PhaseActive, dt.waitRevision(lease, 1).Phase)
		m.Services[0].Image = "nginx:1.27"
		dt.deploy(m)
		st := dt.waitRevision(lease, 2)
		require.Equal(t, api.PhaseActive, st.Phase, st.LastError)

		msgs := dt.measurements(api.RolloutWorkflowID(manifest.Namespace(lease), "web"), "MeasureHTTP")
		require.Len(t, msgs, len(targets), "one measurement per step: %q", msgs)
		for i, tg := range targets {
			assert.Contains(t, msgs[i].Message, tg.want, tg.url)
			assert.Nil(t, msgs[i].Value, tg.url)
			assert.Equal(t, "Inconclusive", string(msgs[i].Phase), tg.url)
			assert.NotContains(t, msgs[i].Message, "s3cr3t", "a field's text is never echoed")
		}
		assert.Zero(t, forbidden.hits.Load(), "no request reached the forbidden address")
		prom := dt.measurements(api.RolloutWorkflowID(manifest.Namespace(lease), "web"), "MeasurePrometheus")
		require.Len(t, prom, 1)
		assert.Nil(t, prom[0].Value, "another tenant's series are not read: %s", prom[0].Message)
		assert.Contains(t, prom[0].Message, "no data")
		dt.noFailedWorkflowTask(api.DeployWorkflowID(lease))
		dt.noFailedWorkflowTask(api.RolloutWorkflowID(manifest.Namespace(lease), "web"))
	})

	// Its namespace's profile (issue 20.4, 20.5): the Pod Security level,
	// the quota and the defaults, and pods without an API token.
	ns, err := dt.env.Kube.CoreV1().Namespaces().Get(context.Background(), manifest.Namespace(bystander), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "baseline", ns.Labels[activities.PodSecurityEnforceLabel])
	quota, err := dt.env.Kube.CoreV1().ResourceQuotas(ns.Name).Get(context.Background(), activities.ProfileName, metav1.GetOptions{})
	require.NoError(t, err, "the lease's ResourceQuota")
	// Node and cluster resources too (issue 35.5): before, a few leases'
	// IP endpoints could take a cluster's whole NodePort range, and node
	// disk and Jobs were not counted.
	for res, want := range map[corev1.ResourceName]string{
		corev1.ResourceLimitsEphemeralStorage: "100Gi", corev1.ResourceServicesNodePorts: "16",
		corev1.ResourceServicesLoadBalancers: "4", "count/jobs.batch": "100",
		// and on what its deploys write that its manifest only bounds
		corev1.ResourceRequestsEphemeralStorage: "100Gi", corev1.ResourceServices: "64", "count/replicasets.apps": "1024",
		// and no GPUs where the provider offers none (issue 37.2)
		"requests.nvidia.com/gpu": "0", "requests.amd.com/gpu": "0",
		// nor persistent storage (issue 39.1)
		corev1.ResourceRequestsStorage: "0", corev1.ResourcePersistentVolumeClaims: "0",
	} {
		got := quota.Spec.Hard[res]
		assert.Equal(t, want, got.String(), "the lease's quota on %s", res)
	}
	_, err = dt.env.Kube.CoreV1().LimitRanges(ns.Name).Get(context.Background(), activities.ProfileName, metav1.GetOptions{})
	assert.NoError(t, err, "the lease's LimitRange")
	pods, err := dt.env.Kube.CoreV1().Pods(ns.Name).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, pods.Items)
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			assert.False(t, v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access"), "pod %s mounts an API token", p.Name)
		}
		assert.NotEmpty(t, p.Spec.Containers[0].Resources.Limits, "pod %s has the LimitRange's defaults", p.Name)
		disk := p.Spec.Containers[0].Resources.Limits[corev1.ResourceEphemeralStorage]
		assert.Equal(t, "1Gi", disk.String(), "pod %s's ephemeral-storage limit, the LimitRange's default", p.Name)
	}

	// The bystander kept deploying meanwhile, on the same worker.
	began = time.Now()
	dt.deploy(twoServices(bystander, bystander+".apps.example.com", "nginx:1.27", nil, false))
	st := dt.waitRevision(bystander, 2)
	assert.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	dt.noFailedWorkflowTask(api.DeployWorkflowID(bystander))
	// What the hostile inputs cost the worker, measured (issue 35): the
	// bystander's deploy before and after them, and the heap in use (the
	// worker runs in this test binary, beside the package's other tests,
	// so the heap is an upper bound). Figures, not assertions: speed
	// targets live in make bench.
	t.Logf("the bystander's deploys: %s before the hostile inputs, %s after; heap in use %d MiB before, %d MiB after",
		firstDeploy.Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond), heapBefore>>20, heapInUse()>>20)
}

// heapInUse is this process's heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// refusal sends m as a deploy and returns why it was refused: by the
// update's validator (the manifest), or by the deploy's first step (the
// operator's limits, checked before anything is written).
func (dt *deployTest) refusal(m manifest.Manifest) string {
	dt.t.Helper()
	_, err := dt.tryDeploy(m)
	if err != nil {
		// The start of update-with-start carries the manifest too: a
		// workflow that refuses its input ends before the update is
		// handled, and its own error names the field.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if werr := dt.env.Temporal.GetWorkflow(ctx, api.DeployWorkflowID(m.Lease), "").Get(ctx, nil); werr != nil {
			return err.Error() + "; " + werr.Error()
		}
		return err.Error()
	}
	var why string
	testenv.Eventually(dt.t, 3*time.Minute, pollQuery, "the deploy was never refused", func() (bool, string) {
		st, err := dt.status(m.Lease)
		if err != nil {
			// The workflow ended: its error says why.
			werr := dt.env.Temporal.GetWorkflow(context.Background(), api.DeployWorkflowID(m.Lease), "").Get(context.Background(), nil)
			if werr != nil {
				why = werr.Error()
				return true, ""
			}
			return false, err.Error()
		}
		why = st.LastError
		return st.LastError != "" && !st.Pending && st.Phase != api.PhaseDeploying, fmt.Sprintf("phase %s, last error %q", st.Phase, st.LastError)
	})
	return why
}

// noFailedWorkflowTask checks that no workflow task of id's runs failed.
func (dt *deployTest) noFailedWorkflowTask(id string) {
	dt.t.Helper()
	it := dt.env.Temporal.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(dt.t, err)
		assert.NotEqual(dt.t, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, ev.GetEventType(), "%s: a workflow task failed: %v", id, ev)
	}
}

// measurements are the results of a rollout's local activities of type
// act, in order, as its history recorded them.
func (dt *deployTest) measurements(id, act string) []activities.Measurement {
	dt.t.Helper()
	it := dt.env.Temporal.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	dc := converter.GetDefaultDataConverter()
	var out []activities.Measurement
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(dt.t, err)
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "LocalActivity" {
			continue
		}
		var data struct{ ActivityType string }
		require.NoError(dt.t, dc.FromPayloads(m.GetDetails()["data"], &data))
		if data.ActivityType != act {
			continue
		}
		var res activities.Measurement
		require.NoError(dt.t, dc.FromPayloads(m.GetDetails()["result"], &res))
		out = append(out, res)
	}
	return out
}

// hitCounter is an HTTP server on the loopback that counts its requests.
type hitCounter struct {
	addr string
	hits atomic.Int32
}

func newHitCounter(t *testing.T, listen string, h http.HandlerFunc) *hitCounter {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	require.NoError(t, err)
	hc := &hitCounter{addr: ln.Addr().String()}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hc.hits.Add(1)
		h(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return hc
}

func (h *hitCounter) port() string {
	_, p, _ := net.SplitHostPort(h.addr)
	return p
}

// Issue 20.7: hand-typed inputs cannot skip validation. Started by hand
// (the temporal CLI, the UI), a lease's workflow with a carry (state only
// the workflow writes when it continues as new: a last-known-good manifest
// never validated, a revision, an owner) or a trigger that is not a short
// printable word (it reaches a search attribute and the UI's markdown) ends
// at once, typed; a rollout with a carry too. A deploy update's trigger and
// a rollout's scale are bounded like the rest. Before, a carry was taken as
// the lease's state, and any trigger was published.
func TestHandTypedInputsCannotSkipValidation(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	m := `{"lease": "` + dt.lease + `", "services": [{"name": "web", "image": "nginx:1.27", "replicas": 1}]}`
	for i, c := range []struct{ workflowType, input, want string }{
		{"DeployWorkflow", `{"manifest": ` + m + `, "carry": {"phase": "Active", "revision": 41, "lastGood": {"lease": "` + dt.lease + `", "services": [{"name": "web", "image": "nginx:1.27", "replicas": 1000}]}}}`,
			"carry: is set by the workflow itself when it continues as new"},
		{"DeployWorkflow", `{"manifest": ` + m + `, "carry": {"phase": "Active", "lastGood": {"lease": "` + dt.lease + `", "services": [{"name": "web", "image": "", "replicas": 1}]}}}`,
			"carry.lastGood: services[0].image"},
		{"DeployWorkflow", `{"manifest": ` + m + `, "trigger": "` + strings.Repeat("x", 100) + `"}`, "trigger: 100 bytes"},
		{"DeployWorkflow", `{"manifest": ` + m + `, "trigger": "[click](http://evil.example)"}`, `trigger: "[click](http://evil.example)": use letters, digits`},
		{"RolloutWorkflow", `{"namespace": "shop", "service": "web", "carry": {"deployment": {"spec": {"replicas": 3}}, "stableRevision": 7}}`, "carry: is set by the workflow itself"},
		// Issue 35: a hand-started rollout's analyses were never validated.
		{"RolloutWorkflow", `{"namespace": "shop", "service": "web", "steps": [{"setWeight": 50}, {"analysis": {"prometheus": {"query": "max_over_time(up[1h:1ms])"}, "successCondition": "len(repeat(\"a\", 100000)) > 0"}}]}`,
			"steps[1].analysis.successCondition"},
		// Issue 38.4: the routes whose weights a hand-started canary sets.
		{"RolloutWorkflow", `{"namespace": "shop", "service": "web", "trafficRoutes": ["web-80", "../../gateway"], "scaleDownDelaySeconds": 86400}`,
			`trafficRoutes[1]: "../../gateway" is not a valid HTTPRoute name`},
	} {
		id := fmt.Sprintf("%s-guard-%d", api.DeployWorkflowID(dt.lease), i)
		dt.temporalCLI("workflow", "start", "--type", c.workflowType, "--task-queue", dt.tq, "--workflow-id", id, "--input", c.input)
		err := dt.env.Temporal.GetWorkflow(ctx, id, "").Get(ctx, nil)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr, c.want)
		assert.Equal(t, api.ErrInvalidInput, appErr.Type(), appErr.Error())
		assert.True(t, appErr.NonRetryable())
		assert.Contains(t, appErr.Error(), c.want)
		dt.noFailedWorkflowTask(id)
	}
	_, err := dt.env.Kube.CoreV1().Namespaces().Get(ctx, manifest.Namespace(dt.lease), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing was written")

	// A running lease refuses a deploy update whose trigger is markdown.
	dt.temporalCLI("workflow", "start", "--type", "DeployWorkflow", "--task-queue", dt.tq,
		"--workflow-id", api.DeployWorkflowID(dt.lease), "--input", `{"manifest": `+m+`}`)
	t.Cleanup(func() {
		_ = dt.env.Temporal.TerminateWorkflow(context.Background(), api.DeployWorkflowID(dt.lease), "", "test over")
	})
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase)
	out, err := exec.Command(dt.env.Stack.Bin(devstack.Temporal), "workflow", "update", "execute", "--address", devstack.TemporalAddress,
		"--workflow-id", api.DeployWorkflowID(dt.lease), "--name", api.UpdateDeploy,
		"--input", `{"manifest": `+m+`, "trigger": "<img src=x onerror=alert(1)>"}`).CombinedOutput()
	require.Error(t, err, "the update was accepted: %s", out)
	assert.Contains(t, string(out), "trigger:")
	// Nor a plan fingerprint no plan has (issue 35.2): 200 KB of it was
	// carried into the lease's state as it came, and not echoed back now.
	input := filepath.Join(t.TempDir(), "update.json")
	require.NoError(t, os.WriteFile(input, []byte(`{"manifest": `+m+`, "planFingerprint": "`+strings.Repeat("f", 200<<10)+`"}`), 0o600))
	out, err = exec.Command(dt.env.Stack.Bin(devstack.Temporal), "workflow", "update", "execute", "--address", devstack.TemporalAddress,
		"--workflow-id", api.DeployWorkflowID(dt.lease), "--name", api.UpdateDeploy, "--input-file", input).CombinedOutput()
	require.Error(t, err, "the update was accepted")
	assert.Contains(t, string(out), "planFingerprint: 204800 bytes that are no plan's fingerprint")
	assert.Less(t, len(out), 4096, "the fingerprint is not echoed")
	st, err := dt.status(dt.lease)
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Revision, "nothing deployed again")
}

// Issue 20.5: a RolloutWorkflow typed by hand (the temporal CLI, the UI)
// into a lease's namespace, with a template using the node's PID and
// network namespaces and a hostPath of /, took over the lease's service
// (its ReplicaSet went from 2 to 0) while the lease still reported Active.
// Now a rollout acts in a lease's namespace only as that lease's own child,
// and no template, from any entry point, gets the node's privileges.
func TestARolloutTypedByHandCannotTakeALeasesService(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	dt.deploy(twoServices(dt.lease, dt.lease+".apps.example.com", "nginx:1.26", nil, false))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase)
	ns := manifest.Namespace(dt.lease)

	host := `"hostPID": true, "hostNetwork": true, "volumes": [{"name": "root", "hostPath": {"path": "/"}}], ` +
		`"containers": [{"name": "web", "image": "alpine:3", "securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN"]}}, "volumeMounts": [{"name": "root", "mountPath": "/host"}]}]`
	plain := `"containers": [{"name": "web", "image": "alpine:3"}]`
	other := dt.env.Namespace(t) // a namespace standalone rollouts may use
	for i, c := range []struct{ ns, spec, typ, want string }{
		{ns, plain, activities.ErrNamespaceNotAllowed, "is lease " + dt.lease + "'s: only that lease's own workflow rolls out there"},
		{ns, host, activities.ErrNamespaceNotAllowed, "is lease " + dt.lease + "'s"},
		{other, host, activities.ErrPodPolicy, "deployment.spec.template.spec.volumes[0].hostPath"},
	} {
		id := fmt.Sprintf("rollout-by-hand-%s-%d", dt.lease, i)
		dt.temporalCLI("workflow", "start", "--type", "RolloutWorkflow", "--task-queue", dt.tq, "--workflow-id", id,
			"--input", `{"namespace": "`+c.ns+`", "service": "web", "deployment": {"spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {`+c.spec+`}}}}}`)
		err := dt.env.Temporal.GetWorkflow(ctx, id, "").Get(ctx, nil)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr, c.want)
		assert.Equal(t, c.typ, appErr.Type(), appErr.Error())
		assert.Contains(t, appErr.Error(), c.want)
		if c.typ == activities.ErrPodPolicy {
			for _, w := range []string{"spec.hostNetwork", "spec.hostPID", "containers[0].securityContext.privileged", "containers[0].securityContext.capabilities.add: SYS_ADMIN"} {
				assert.Contains(t, appErr.Error(), w)
			}
		}
		dt.noFailedWorkflowTask(id)
	}
	desired, available, images := dt.available(ns, "web")
	assert.Equal(t, int32(3), desired, "the lease's web is untouched")
	assert.Equal(t, int32(3), available)
	assert.Equal(t, map[string]int32{"nginx:1.26": 3}, images)
	list, err := dt.env.Kube.AppsV1().ReplicaSets(other).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, list.Items, "no ReplicaSet was written for the privileged template")
}

// Issue 35.1 on the real stack: a deploy started by hand (the Temporal UI,
// `temporal workflow start --input-file`) whose condition is 200,000 "!"
// before "true" (within the manifest's size; 900,000 are refused by the
// size alone). Its decode overflowed the worker's stack, a fatal error no
// recover catches: here the test's own worker, and so the test binary,
// died. It is refused, typed, naming the field, and the worker goes on:
// the same lease deploys next.
func TestAStackOverflowingConditionTypedByHandIsRefusedAndTheWorkerGoesOn(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	input := json.RawMessage(`{"manifest": {"lease": "` + dt.lease + `", "services": [{"name": "web", "image": "nginx:1.27",` +
		` "rollout": {"strategy": "Canary", "steps": [{"setWeight": 50}], "analysis": {"prometheus": {"query": "vector(1)"},` +
		` "successCondition": "` + strings.Repeat("!", 200000) + `true"}}}]}}`)
	run, err := dt.env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: api.DeployWorkflowID(dt.lease), TaskQueue: dt.tq},
		"DeployWorkflow", input) // by name, as typed by hand
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = run.Get(wctx, nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "the deploy is refused, typed")
	assert.Equal(t, api.ErrInvalidManifest, appErr.Type())
	assert.Contains(t, appErr.Error(), "manifest.services[0].rollout.analysis.successCondition")
	assert.Contains(t, appErr.Error(), "a condition is at most 256")

	dt.deploy(web(dt.lease, "web", "nginx:1.27", 1))
	assert.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase, "the worker goes on")
}

// Issue 35.2: a lease's workflow started by hand under another ID than
// its lease's (here the ID of another lease the caller holds) acted for
// that lease beside the lease's own workflow: it deployed over it (here it
// would roll web to nginx:1.27), and one that failed early released the
// hostnames and IPs the lease's Ingress and Services still used. It is
// refused, typed, naming the ID to use, before it reads or writes anything;
// the lease keeps its workload, its hostname and its IP.
func TestALeaseWorkflowTypedByHandUnderAnotherIDIsRefused(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	host := dt.lease + ".apps.example.com"
	dt.deploy(twoServices(dt.lease, host, "nginx:1.26", nil, false))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase)
	attacker := testenv.ShortName("lease")
	dt.createLease(attacker, "globex")

	forged, err := json.Marshal(map[string]any{"manifest": twoServices(dt.lease, host, "nginx:1.27", nil, false)})
	require.NoError(t, err)
	for _, id := range []string{api.DeployWorkflowID(attacker), "deploy-" + dt.lease + "-2", "anything"} {
		dt.temporalCLI("workflow", "start", "--type", "DeployWorkflow", "--task-queue", dt.tq, "--workflow-id", id, "--input", string(forged))
		err := dt.env.Temporal.GetWorkflow(ctx, id, "").Get(ctx, nil)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr, id)
		assert.Equal(t, api.ErrInvalidInput, appErr.Type(), appErr.Error())
		assert.Contains(t, appErr.Error(), "workflow ID: lease "+dt.lease+"'s deploys run as workflow "+api.DeployWorkflowID(dt.lease)+", not "+id)
		dt.noFailedWorkflowTask(id)
	}

	desired, available, images := dt.available(manifest.Namespace(dt.lease), "web")
	assert.Equal(t, int32(3), desired, "the lease's web is untouched")
	assert.Equal(t, int32(3), available)
	assert.Equal(t, map[string]int32{"nginx:1.26": 3}, images)
	held, err := dt.acts.Hostnames.Held(ctx, dt.lease)
	require.NoError(t, err)
	assert.Equal(t, []string{host}, held, "the lease keeps its hostname")
	ips, err := dt.acts.IPs.Declared(ctx, dt.lease)
	require.NoError(t, err)
	assert.NotEmpty(t, ips, "the lease keeps its IP")
	st, err := dt.status(dt.lease)
	require.NoError(t, err)
	assert.Equal(t, api.PhaseActive, st.Phase)
	assert.Equal(t, int64(1), st.Revision, "nothing deployed over it")
}

// Issue 35.2: an "observe" update typed by hand saying the lease closed
// tore an Active lease down (namespace deleted, status TornDown), though
// teardown was to follow only the lease's record read closed. An
// observation is a hint: the workflow reads the record, finds it Active,
// and nothing changes; when the lease really closes, it is torn down.
func TestAClosedObservationTypedByHandTearsNothingDown(t *testing.T) {
	dt := newDeployTest(t)
	ctx := context.Background()
	dt.deploy(web(dt.lease, "web", "nginx:1.27", 2))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase)
	id := api.DeployWorkflowID(dt.lease)

	// The workflow may be between two waits just after its deploy: an
	// observation is deferred for a moment then (ObservationDeferred);
	// send it again until it is taken.
	testenv.Eventually(t, time.Minute, pollQuery, "the observation was never taken", func() (bool, string) {
		out, err := exec.Command(dt.env.Stack.Bin(devstack.Temporal), "workflow", "update", "execute", "--address", devstack.TemporalAddress,
			"--workflow-id", id, "--name", api.UpdateObserve, "--input", `{"lease": "`+dt.lease+`", "closed": true}`).CombinedOutput()
		return err == nil, string(out)
	})
	// Taken: its workflow task ran the read of the record.
	testenv.Eventually(t, 2*time.Minute, pollQuery, "the lease's record was never read", func() (bool, string) {
		return dt.ranLocalActivity(id, "CheckLease"), "no CheckLease yet"
	})
	st, err := dt.status(dt.lease)
	require.NoError(t, err)
	assert.Equal(t, api.PhaseActive, st.Phase, "the lease is not torn down on a hint")
	_, err = dt.env.Kube.CoreV1().Namespaces().Get(ctx, manifest.Namespace(dt.lease), metav1.GetOptions{})
	require.NoError(t, err, "the namespace is kept")
	_, available, _ := dt.available(manifest.Namespace(dt.lease), "web")
	assert.Equal(t, int32(2), available)

	// Closed for real: torn down, as ever.
	_, err = dt.acts.Leases.Close(ctx, dt.lease)
	require.NoError(t, err)
	testenv.Eventually(t, 2*time.Minute, pollQuery, "the closed lease was never torn down", func() (bool, string) {
		_, err := dt.env.Kube.CoreV1().Namespaces().Get(ctx, manifest.Namespace(dt.lease), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		ns, _ := dt.env.Kube.CoreV1().Namespaces().Get(ctx, manifest.Namespace(dt.lease), metav1.GetOptions{})
		return ns != nil && ns.DeletionTimestamp != nil, "namespace still there"
	})
}

// ranLocalActivity reports whether the latest run of workflow id recorded
// a local activity of type typ (a marker naming it).
func (dt *deployTest) ranLocalActivity(id, typ string) bool {
	dt.t.Helper()
	it := dt.env.Temporal.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(dt.t, err)
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil && strings.Contains(m.String(), typ) {
			return true
		}
	}
	return false
}
