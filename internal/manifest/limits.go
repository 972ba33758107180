package manifest

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/deployflow/deployflow/internal/promscope"
)

// Limits are the operator's bounds on what one lease's manifest may take
// (issue 20.4): a tenant is a stranger, and without them one manifest could
// take the whole IP pool, every hostname or the cluster's capacity. They are
// worker flags (--max-*) and chart values; a manifest over one is refused
// before anything is written, naming the field and the limit.
type Limits struct {
	Services        int           `json:"services"`        // services in a manifest
	PortsPerService int           `json:"portsPerService"` // ports of one service
	IPEndpoints     int           `json:"ipEndpoints"`     // declared IP endpoints (each takes an address of the pool)
	Hostnames       int           `json:"hostnames"`       // distinct hostnames
	TotalReplicas   int32         `json:"totalReplicas"`   // replicas of all services together
	CanarySteps     int           `json:"canarySteps"`     // steps of one canary
	MinInterval     time.Duration `json:"minInterval"`     // an analysis's shortest interval
	MaxCount        int32         `json:"maxCount"`        // an analysis's most measurements
	MaxJobSeconds   int64         `json:"maxJobSeconds"`   // an analysis Job's longest activeDeadlineSeconds
	MinProbePeriod  time.Duration `json:"minProbePeriod"`  // a probe's shortest period (the kubelet's load)
	// NodePorts is the lease namespace's quota of NodePorts
	// (--lease-quota-nodeports): each port exposed on an IP endpoint is a
	// port of its LoadBalancer Service, which takes one of the cluster's
	// NodePorts. Checked here, before anything is written, rather than
	// met as the API server's quota error at apply.
	// NoNodePorts is a quota of none: 0 is unset (the default).
	NodePorts int `json:"nodePorts,omitempty"`
	// PrometheusLabel is the label the worker confines every query to
	// (--prometheus-namespace-label; "" is promscope.DefaultLabel): a
	// query selecting by it is refused. Validation checks the default
	// label; this checks the operator's own.
	PrometheusLabel string `json:"prometheusLabel,omitempty"`
	// PodSecurity is the Pod Security level lease namespaces enforce
	// (--pod-security; "" is baseline): at restricted, a manifest whose
	// containers may run as root is refused before anything is written,
	// rather than each pod by the API server after.
	PodSecurity string `json:"podSecurity,omitempty"`
	// Capabilities are the Linux capabilities a manifest's security
	// section may add back (--allow-capabilities; nil is
	// DefaultAllowedCapabilities).
	Capabilities []string `json:"capabilities,omitempty"`
	// GPUModels are the GPUs this provider offers (--gpu-models),
	// vendor/model or vendor/* (gpu.go); none: a manifest may ask for
	// none. GPUs is how many one lease may take, units times replicas of
	// all its services (--max-gpus).
	GPUModels []string `json:"gpuModels,omitempty"`
	GPUs      int      `json:"gpus,omitempty"`
	// Secrets is whether this provider keeps secrets (secrets.go): its
	// workers encrypt what they write into Temporal (--codec-keys-file).
	// Without, a manifest with a secret is refused.
	Secrets bool `json:"secrets,omitempty"`
	// StorageClasses are the storage classes a persistent volume may name
	// (--storage-classes; none: no persistent volume). Storage is the most
	// a lease's volumes may take together, each times its service's
	// replicas, a quantity (--max-storage; "" is DefaultMaxStorage).
	StorageClasses []string `json:"storageClasses,omitempty"`
	Storage        string   `json:"storage,omitempty"`
}

// DefaultMaxStorage is the storage a lease's volumes may take unless the
// operator sets --max-storage.
const DefaultMaxStorage = "100Gi"

// DefaultLimits are the limits a worker enforces unless its operator sets
// others: room for an ordinary multi-service app, none for taking a
// provider's shared resources.
func DefaultLimits() Limits {
	return Limits{
		Services: 16, PortsPerService: 8, IPEndpoints: 4, Hostnames: 16, TotalReplicas: 64,
		CanarySteps: 32, MinInterval: time.Second, MaxCount: 1000, MaxJobSeconds: 1800, NodePorts: 16,
		MinProbePeriod: time.Second, GPUs: 8,
	}
}

// OrDefaults is l with each unset (zero) limit at its default.
func (l Limits) OrDefaults() Limits {
	d := DefaultLimits()
	orDefault(&l.Services, d.Services)
	orDefault(&l.PortsPerService, d.PortsPerService)
	orDefault(&l.IPEndpoints, d.IPEndpoints)
	orDefault(&l.Hostnames, d.Hostnames)
	orDefault(&l.TotalReplicas, d.TotalReplicas)
	orDefault(&l.CanarySteps, d.CanarySteps)
	orDefault(&l.MinInterval, d.MinInterval)
	orDefault(&l.MaxCount, d.MaxCount)
	orDefault(&l.MaxJobSeconds, d.MaxJobSeconds)
	orDefault(&l.MinProbePeriod, d.MinProbePeriod)
	orDefault(&l.GPUs, d.GPUs)
	if l.NodePorts == 0 {
		l.NodePorts = d.NodePorts
	}
	l.NodePorts = max(l.NodePorts, 0) // NoNodePorts
	if q, err := resource.ParseQuantity(l.Storage); err != nil || q.Sign() < 0 {
		l.Storage = DefaultMaxStorage
	}
	return l
}

// NoNodePorts as Limits.NodePorts is a quota of no NodePorts (the
// operator's --lease-quota-nodeports 0): no port may be exposed on an IP
// endpoint.
const NoNodePorts = -1

// UnboundedNodePorts as Limits.NodePorts: an IP endpoint's ports take no
// NodePorts (the operator's LoadBalancer Services allocate none).
const UnboundedNodePorts = 1 << 30

func orDefault[T int | int32 | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// CheckLimits returns a *ValidationError naming each field of m over a
// limit of l (unset limits at their defaults), or nil. m is validated
// already.
func (m *Manifest) CheckLimits(l Limits) error {
	l = l.OrDefaults()
	var v problems
	over := func(path string, n int, limit int, what, flag string) {
		if n > limit {
			v.add(path, "%d %s: this provider allows at most %d per lease (the operator's %s)", n, what, limit, flag)
		}
	}
	over("services", len(m.Services), l.Services, "services", "--max-services")
	// The first IP endpoint, NodePort or hostname past the limit is named.
	endpoints, hosts := map[string]bool{}, map[string]bool{}
	var endpointPath, hostPath, nodePortPath string
	nodePorts := 0
	for i, s := range m.Services {
		for j, p := range s.Ports {
			pp := index(field(index("services", i), "ports"), j)
			if p.Expose == nil {
				continue
			}
			if e := p.Expose.IP; e != "" {
				if nodePorts++; nodePorts == l.NodePorts+1 {
					nodePortPath = field(pp, "expose.ip")
				}
				if !endpoints[e] {
					if endpoints[e] = true; len(endpoints) == l.IPEndpoints+1 {
						endpointPath = field(pp, "expose.ip")
					}
				}
			}
			if p.Expose.HTTP == nil {
				continue
			}
			for k, h := range p.Expose.HTTP.Hostnames {
				if !hosts[h] {
					if hosts[h] = true; len(hosts) == l.Hostnames+1 {
						hostPath = index(field(pp, "expose.http.hostnames"), k)
					}
				}
			}
		}
	}
	over(endpointPath, len(endpoints), l.IPEndpoints, "declared IP endpoints (each takes an address of the provider's pool)", "--max-ip-endpoints")
	over(hostPath, len(hosts), l.Hostnames, "hostnames", "--max-hostnames")
	over(nodePortPath, nodePorts, l.NodePorts, "ports exposed on IP endpoints (each takes a NodePort of the cluster's shared range)", "--lease-quota-nodeports")
	var replicas int64
	for i := range m.Services {
		s := &m.Services[i]
		p := index("services", i)
		if len(s.Ports) > l.PortsPerService {
			v.add(field(p, "ports"), "%d ports: this provider allows at most %d per service (the operator's --max-ports)", len(s.Ports), l.PortsPerService)
		}
		if s.Replicas != nil {
			replicas += int64(*s.Replicas)
		} else {
			replicas++
		}
		r := s.Rollout
		if r == nil {
			continue
		}
		rp := field(p, "rollout")
		if len(r.Steps) > l.CanarySteps {
			v.add(field(rp, "steps"), "%d steps: this provider allows at most %d per canary (the operator's --max-canary-steps)", len(r.Steps), l.CanarySteps)
		}
		for j, st := range r.Steps {
			if st.Analysis != nil {
				analysisLimits(&v, field(index(field(rp, "steps"), j), "analysis"), st.Analysis, l)
			}
		}
		if r.Analysis != nil {
			analysisLimits(&v, field(rp, "analysis"), r.Analysis, l)
		}
		if bg := r.BlueGreen; bg != nil {
			if bg.PrePromotionAnalysis != nil {
				analysisLimits(&v, field(rp, "blueGreen.prePromotionAnalysis"), bg.PrePromotionAnalysis, l)
			}
			if bg.PostPromotionAnalysis != nil {
				analysisLimits(&v, field(rp, "blueGreen.postPromotionAnalysis"), bg.PostPromotionAnalysis, l)
			}
		}
	}
	if replicas > int64(l.TotalReplicas) {
		v.add("services[*].replicas", "%d replicas in all: this provider allows at most %d per lease (the operator's --max-replicas)", replicas, l.TotalReplicas)
	}
	m.checkSecurity(&v, l.PodSecurity, l.Capabilities)
	m.checkProbes(&v, l.MinProbePeriod)
	m.checkGPUs(&v, l.GPUModels, l.GPUs)
	m.checkStorage(&v, l.StorageClasses, resource.MustParse(l.Storage))
	if !l.Secrets {
		for i := range m.Services {
			s := &m.Services[i]
			if s.hasSecrets() {
				f := "secretEnv"
				if s.Credentials != nil {
					f = "credentials"
				}
				v.add(field(index("services", i), f), "this provider keeps no secrets: its workers have no encryption keys (the operator's --codec-keys-file), and the value would be stored in plain text in Temporal")
				break
			}
		}
	}
	if p := m.Placement; p != nil {
		for i, w := range p.Waves {
			if w.Analysis != nil {
				analysisLimits(&v, field(index("placement.waves", i), "analysis"), w.Analysis, l)
			}
		}
	}
	return v.err()
}

func analysisLimits(v *problems, path string, a *Analysis, l Limits) {
	if d := a.IntervalDuration(); d < l.MinInterval {
		v.add(field(path, "interval"), "%s: this provider measures at most every %s (the operator's --min-analysis-interval)", d, l.MinInterval)
	}
	if a.Count > l.MaxCount {
		v.add(field(path, "count"), "%d measurements: this provider allows at most %d per analysis (the operator's --max-analysis-count)", a.Count, l.MaxCount)
	}
	if q := a.Prometheus; q != nil && l.PrometheusLabel != "" && l.PrometheusLabel != promscope.DefaultLabel {
		if _, err := promscope.Scope(q.Query, l.PrometheusLabel, "lease"); err != nil {
			v.add(field(path, "prometheus.query"), "%q: %s", truncate(q.Query, 80), err)
		}
	}
	if a.Job != nil && a.Job.Deadline() > l.MaxJobSeconds {
		v.add(field(path, "job.activeDeadlineSeconds"), "%d: this provider runs an analysis Job for at most %d seconds (the operator's --max-job-seconds)", a.Job.Deadline(), l.MaxJobSeconds)
	}
}

// String is l as the worker logs it.
func (l Limits) String() string {
	gpus := "none"
	if len(l.GPUModels) > 0 {
		gpus = fmt.Sprintf("%d of %s", l.GPUs, strings.Join(l.GPUModels, ","))
	}
	storage := "none"
	if len(l.StorageClasses) > 0 {
		storage = fmt.Sprintf("%s of %s", l.Storage, strings.Join(l.StorageClasses, ","))
	}
	return fmt.Sprintf("services %d, ports %d, IP endpoints %d, hostnames %d, replicas %d, canary steps %d, analysis interval ≥%s, count ≤%d, job ≤%ds, probe period ≥%s, GPUs %s, persistent storage %s",
		l.Services, l.PortsPerService, l.IPEndpoints, l.Hostnames, l.TotalReplicas, l.CanarySteps, l.MinInterval, l.MaxCount, l.MaxJobSeconds, l.MinProbePeriod, gpus, storage)
}
