package activities

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/k8s/statefulset"
)

// RenderObjects is the lease's Services, LoadBalancer Services (with their
// declared IPs) and Ingress, without the hostnames withheld for the owner's
// other leases. The deploy and its plan both render with it.
func RenderObjects(m *manifest.Manifest, ips map[string]string, withheld []Withheld) (ApplyObjectsInput, error) {
	out := ApplyObjectsInput{Namespace: manifest.Namespace(m.Lease), Lease: m.Lease}
	out.Services = append(out.Services, m.ClusterIPServices()...)
	out.Services = append(out.Services, m.HeadlessServices()...) // stateful services' identities (issue 39)
	lbs, err := m.LoadBalancerServices(ips)
	if err != nil {
		return out, err
	}
	out.Services = append(out.Services, lbs...)
	if ing := m.Ingress(); ing != nil {
		skip := map[string]bool{}
		for _, h := range withheld {
			skip[h.Hostname] = true
		}
		var rules []networkingv1.IngressRule
		for _, r := range ing.Spec.Rules {
			if !skip[r.Host] {
				rules = append(rules, r)
			}
		}
		if len(rules) > 0 {
			ing.Spec.Rules = rules
			out.Ingress = ing
		}
	}
	return out, nil
}

// renderObjects is RenderObjects with the operator's namespace profile:
// where its load balancer reaches pods directly
// (--lease-loadbalancers-without-nodeports), a declared IP endpoint's
// LoadBalancer Service allocates no NodePorts.
func (a *Activities) renderObjects(m *manifest.Manifest, ips map[string]string, withheld []Withheld) (ApplyObjectsInput, error) {
	out, err := RenderObjects(m, ips, withheld)
	if err != nil {
		return out, err
	}
	if a.Gateway != nil {
		// --routing gateway: the hostnames are HTTPRoutes on the
		// operator's Gateway, not the lease's Ingress.
		skip := map[string]bool{}
		for _, h := range withheld {
			skip[h.Hostname] = true
		}
		out.Ingress, out.HTTPRoutes = nil, m.HTTPRoutes(a.Gateway.Ref, skip)
		// A canary's routes weigh its stable and canary Services.
		out.Services = append(out.Services, m.TrafficServices()...)
	}
	if !a.Namespace.LoadBalancersWithoutNodePorts {
		return out, nil
	}
	for _, svc := range out.Services {
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			svc.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
		}
	}
	return out, nil
}

// ServiceChange is c in the plan's terms, with m's steps for a service
// with a running version to compare with; ok is false for a service the
// deploy does not roll (no change, or only its metadata).
func ServiceChange(c Classification, m *manifest.Manifest) (change plan.ServiceChange, ok bool) {
	change = plan.ServiceChange{Service: c.Service, Scale: c.Class == ChangeScale,
		CurrentImage: c.CurrentImage, DesiredImage: c.DesiredImage, CurrentReplicas: c.CurrentReplicas, DesiredReplicas: c.DesiredReplicas}
	if c.Class != ChangeScale && c.Class != ChangeRollout {
		return change, false
	}
	s, found := m.Lookup(c.Service)
	if change.Scale || !found || s.Rollout == nil || c.CurrentImage == "" {
		return change, true // a first deploy has nothing to compare with or switch from
	}
	switch r := s.Rollout; {
	case r.Strategy == manifest.StrategyBlueGreen:
		for _, step := range r.BlueGreen.Steps(c.Service, c.DesiredImage, c.DesiredReplicas) {
			change.BlueGreenSteps = append(change.BlueGreenSteps, step.Text)
		}
	case r.Strategy == manifest.StrategyCanary:
		for _, step := range r.Steps {
			change.CanarySteps = append(change.CanarySteps, step.String())
		}
		if r.Analysis != nil && len(r.Steps) > 0 {
			change.Background = r.Analysis.String()
		}
	}
	return change, true
}

// PlanInput is a manifest to plan for its lease's owner.
type PlanInput struct {
	Manifest manifest.Manifest `json:"manifest"`
	Owner    string            `json:"owner"`
}

// DeployPlan is what deploying a manifest would do, read from the cluster
// without writing anything (uncloud-style plan).
type DeployPlan struct {
	Lease            string            `json:"lease"`
	Owner            string            `json:"owner"`
	Services         []Classification  `json:"services"`
	ReserveHostnames []string          `json:"reserveHostnames,omitempty"`
	ReleaseHostnames []string          `json:"releaseHostnames,omitempty"`
	Withheld         []Withheld        `json:"withheld,omitempty"`
	KeepIPs          map[string]string `json:"keepIPs,omitempty"`
	AllocateIPs      []string          `json:"allocateIPs,omitempty"`
	ReleaseIPs       []string          `json:"releaseIPs,omitempty"`
	Objects          []string          `json:"objects,omitempty"` // objects that would be applied
	Prune            []string          `json:"prune,omitempty"`   // objects that would be deleted
	Operations       []string          `json:"operations"`        // in the order the deploy runs them
	// Tree is the deploy as the tree of operations its workflow executes,
	// in order; `deploy --plan` prints it.
	Tree    *plan.Node `json:"tree,omitempty"`
	Summary string     `json:"summary"`
	// Fingerprint of the state read and of the tree; an approved plan whose
	// fingerprint no longer matches the cluster is stale and refused.
	Fingerprint string `json:"fingerprint"`
	// MaxReplicas is the operator's bound on the lease's replicas in all
	// (--max-replicas): a scale of one of its rollouts is held to it too.
	MaxReplicas int32 `json:"maxReplicas,omitempty"`
}

// PlanDeploy computes the plan of deploying in.Manifest, with the deploy
// chain's own code: the operator's limits (a manifest over one is a
// non-retryable InvalidManifest), the hostname check, the declared IPs, a dry-run
// server-side apply of the rendered objects, and the classification of each
// service. Conflicts fail it the way they would fail the deploy.
func (a *Activities) PlanDeploy(ctx context.Context, in PlanInput) (*DeployPlan, error) {
	m := &in.Manifest
	if err := requireDefaults("PlanDeploy", m); err != nil {
		return nil, err
	}
	// The operator's limits, before anything is read or written (issue
	// 20.4): a manifest over one is refused naming the field and the limit.
	limits := a.Limits
	limits.PrometheusLabel = a.PrometheusLabel
	if err := m.CheckLimits(limits); err != nil {
		return nil, invalidManifest(err)
	}
	if err := m.CheckReservedKeys(a.ReservedPrefixes, a.AllowedPodKeys); err != nil {
		return nil, invalidManifest(err)
	}
	p := &DeployPlan{Lease: m.Lease, Owner: in.Owner, MaxReplicas: limits.OrDefaults().TotalReplicas}
	hostnames := m.Hostnames()
	check, err := a.CheckHostnames(ctx, HostnamesInput{Lease: m.Lease, Owner: in.Owner, Hostnames: hostnames})
	if err != nil {
		return nil, err
	}
	held, err := a.Hostnames.Held(ctx, m.Lease)
	if err != nil {
		return nil, err
	}
	p.Withheld = check.Withheld
	withheld := map[string]bool{}
	for _, w := range check.Withheld {
		withheld[w.Hostname] = true
	}
	heldSet := setOf(held)
	for _, h := range hostnames {
		if !heldSet[h] && !withheld[h] {
			p.ReserveHostnames = append(p.ReserveHostnames, h)
		}
	}
	p.ReleaseHostnames = without(held, hostnames)

	declared, err := a.IPs.Declared(ctx, m.Lease)
	if err != nil {
		return nil, err
	}
	p.KeepIPs = map[string]string{}
	for _, e := range m.IPEndpoints() {
		if ip, ok := declared[e]; ok {
			p.KeepIPs[e] = ip
		} else {
			p.AllocateIPs = append(p.AllocateIPs, e)
		}
	}
	var declaredEndpoints []string
	for e := range declared {
		declaredEndpoints = append(declaredEndpoints, e)
	}
	sort.Strings(declaredEndpoints)
	p.ReleaseIPs = without(declaredEndpoints, m.IPEndpoints())

	// Objects: a dry run where the namespace exists; otherwise all are new.
	ips := map[string]string{}
	for e, ip := range p.KeepIPs {
		ips[e] = ip
	}
	for _, e := range p.AllocateIPs {
		ips[e] = "192.0.2.1" // any address: new endpoints' Services are new anyway
	}
	objs, err := a.renderObjects(m, ips, check.Withheld)
	if err != nil {
		return nil, invalidInput("%v", err)
	}
	_, err = a.Kube.CoreV1().Namespaces().Get(ctx, objs.Namespace, metav1.GetOptions{})
	nsExists := err == nil
	switch {
	case apierrors.IsNotFound(err):
		for _, s := range objs.Services {
			p.Objects = append(p.Objects, "Service/"+s.Name)
		}
		if objs.Ingress != nil {
			p.Objects = append(p.Objects, "Ingress/"+objs.Ingress.Name)
		}
		for _, r := range objs.HTTPRoutes {
			p.Objects = append(p.Objects, "HTTPRoute/"+r.Name)
		}
	case err != nil:
		return nil, fmt.Errorf("get namespace %s: %w", objs.Namespace, err)
	default:
		objs.DryRun = true
		res, err := a.ApplyObjects(ctx, objs)
		if err != nil {
			return nil, err
		}
		p.Objects, p.Prune = res.Changed, res.Pruned
	}
	sort.Strings(p.Objects)

	var digests []string
	for _, svc := range m.ServiceNames() {
		d, err := m.Deployment(svc)
		if err != nil {
			return nil, invalidInput("%v", err)
		}
		if !nsExists {
			// A first deploy: nothing of the lease runs, so there is
			// nothing to ask the API server (a dry run into a namespace
			// that does not exist only answers NotFound; a list finds
			// nothing). The pod policy still judges the template.
			c, err := classifyNew(svc, d, a.allowedCapabilities())
			if err != nil {
				return nil, err
			}
			p.Services = append(p.Services, *c)
			digests = append(digests, svc+"="+nothingRuns().Digest)
			continue
		}
		cin, err := classifyInput(m, svc, d)
		if err != nil {
			return nil, err
		}
		c, err := a.ClassifyService(ctx, cin)
		if err != nil {
			return nil, err
		}
		if c.Class == ChangeNone && touches(p.Objects, p.Prune, m, svc) {
			c.Class = ChangeMetadata
		}
		p.Services = append(p.Services, *c)
		sd, err := a.serviceDigest(ctx, m, objs.Namespace, svc)
		if err != nil {
			return nil, err
		}
		digests = append(digests, svc+"="+sd)
	}
	d := deploy(p, m)
	p.Operations = Operations(d)
	p.Tree = d.Tree()
	p.Summary = summarize(p)
	p.Fingerprint = fingerprint(held, declared, p.Objects, p.Prune, digests, p.Tree.Fingerprint())
	return p, nil
}

// Tree is the deploy of m that p plans, as the tree of operations the
// lease's workflow executes (internal/plan builds it).
func Tree(p *DeployPlan, m *manifest.Manifest) *plan.Node { return deploy(p, m).Tree() }

func deploy(p *DeployPlan, m *manifest.Manifest) plan.Deploy {
	d := plan.Deploy{Lease: p.Lease, Namespace: manifest.Namespace(p.Lease),
		AllocateIPs: p.AllocateIPs, ReserveHostnames: p.ReserveHostnames, Objects: p.Objects, Prune: p.Prune,
		ReleaseHostnames: p.ReleaseHostnames, ReleaseIPs: p.ReleaseIPs}
	for _, c := range p.Services {
		if change, ok := ServiceChange(c, m); ok {
			d.Services = append(d.Services, change)
		}
	}
	return d
}

// Operations lists a deploy's operations in the order the chain runs them:
// the apply step's, each service's change, the release step's.
func Operations(d plan.Deploy) []string {
	var ops []string
	for _, n := range d.ApplyOps() {
		ops = append(ops, n.Text)
	}
	for _, c := range d.Services {
		ops = append(ops, c.Text())
	}
	for _, n := range d.ReleaseOps() {
		ops = append(ops, n.Text)
	}
	return ops
}

// touches reports whether applied or pruned objects belong to svc: its
// Service, its LoadBalancer Services, or the lease's Ingress when svc has
// hostnames behind it.
func touches(objects, prune []string, m *manifest.Manifest, svc string) bool {
	for _, o := range append(append([]string{}, objects...), prune...) {
		switch {
		case o == "Service/"+svc, strings.HasPrefix(o, "Service/"+svc+"-ip-"):
			return true
		case o == "Ingress/"+manifest.IngressName && hasHostnames(m, svc):
			return true
		case strings.HasPrefix(o, "HTTPRoute/") && routeOf(m, svc, strings.TrimPrefix(o, "HTTPRoute/")):
			return true
		}
	}
	return false
}

// routeOf reports whether route is the HTTPRoute of one of svc's ports.
func routeOf(m *manifest.Manifest, svc, route string) bool {
	s, ok := m.Lookup(svc)
	if !ok {
		return false
	}
	for _, p := range s.Ports {
		if manifest.RouteName(svc, p.Port) == route {
			return true
		}
	}
	return false
}

func hasHostnames(m *manifest.Manifest, svc string) bool {
	s, ok := m.Lookup(svc)
	if !ok {
		return false
	}
	for _, p := range s.Ports {
		if p.Expose != nil && p.Expose.HTTP != nil && len(p.Expose.HTTP.Hostnames) > 0 {
			return true
		}
	}
	return false
}

// TouchesService is touches, for the workflow.
func TouchesService(applied ApplyObjectsResult, m *manifest.Manifest, svc string) bool {
	return touches(applied.Changed, applied.Pruned, m, svc)
}

func summarize(p *DeployPlan) string {
	counts := map[string]int{}
	for _, s := range p.Services {
		counts[s.Class]++
	}
	var parts []string
	for _, c := range []string{ChangeRollout, ChangeScale, ChangeMetadata, ChangeNone} {
		if counts[c] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[c], c))
		}
	}
	return fmt.Sprintf("%d services (%s); hostnames: %d to reserve, %d to release; IPs: %d to allocate, %d to release; %d operations",
		len(p.Services), strings.Join(parts, ", "), len(p.ReserveHostnames), len(p.ReleaseHostnames), len(p.AllocateIPs), len(p.ReleaseIPs), len(p.Operations))
}

func fingerprint(parts ...any) string {
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func setOf(s []string) map[string]bool {
	out := map[string]bool{}
	for _, x := range s {
		out[x] = true
	}
	return out
}

// serviceDigest is what a plan's fingerprint holds of service svc's
// running state: its ReplicaSets' (ReadRolloutState's digest), or for a
// stateful service its StatefulSet's replicas, partition and revisions, its
// pods and its claims (before issue 39's review it read the ReplicaSets a
// stateful service does not have, so a plan stayed fresh whatever its
// StatefulSet did).
func (a *Activities) serviceDigest(ctx context.Context, m *manifest.Manifest, ns, svc string) (string, error) {
	if s, ok := m.Lookup(svc); !ok || !s.Stateful() {
		st, err := a.ReadRolloutState(ctx, ServiceRef{Namespace: ns, Service: svc})
		if err != nil {
			return "", err
		}
		return st.Digest, nil
	}
	st, err := a.ReadStatefulSet(ctx, StatefulSetRef{Namespace: ns, Name: svc})
	switch {
	case apierrors.IsNotFound(err):
		return nothingRuns().Digest, nil
	case err != nil:
		return "", err
	}
	slices.SortFunc(st.Pods, func(x, y statefulset.Pod) int { return cmp.Compare(x.Ordinal, y.Ordinal) })
	b, _ := json.Marshal(st) // maps marshal with sorted keys
	sum := sha256.Sum256(b)
	return "sts:" + hex.EncodeToString(sum[:12]), nil
}
