package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
)

// RenderObjects is the lease's Services, LoadBalancer Services (with their
// declared IPs) and Ingress, without the hostnames withheld for the owner's
// other leases. The deploy and its plan both render with it.
func RenderObjects(m *manifest.Manifest, ips map[string]string, withheld []Withheld) (ApplyObjectsInput, error) {
	out := ApplyObjectsInput{Namespace: manifest.Namespace(m.Lease), Lease: m.Lease}
	out.Services = append(out.Services, m.ClusterIPServices()...)
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

// Operation texts, shared by plans and by the record of what a deploy did,
// so `deploy --plan` and the deploy's history speak the same words.
func OpReserveHostname(h string) string   { return "reserve hostname " + h }
func OpReleaseHostname(h string) string   { return "release hostname " + h }
func OpAllocateIP(endpoint string) string { return "allocate an IP for endpoint " + endpoint }
func OpReleaseIP(endpoint string) string  { return "release the IP of endpoint " + endpoint }
func OpApply(object string) string        { return "apply " + object }
func OpDelete(object string) string       { return "delete " + object }
func OpService(c Classification) string {
	switch c.Class {
	case ChangeRollout:
		if c.CurrentImage == "" {
			return fmt.Sprintf("roll out %s: %s, %d replicas", c.Service, c.DesiredImage, c.DesiredReplicas)
		}
		return fmt.Sprintf("roll out %s: %s → %s, %d → %d replicas", c.Service, c.CurrentImage, c.DesiredImage, c.CurrentReplicas, c.DesiredReplicas)
	case ChangeScale:
		return fmt.Sprintf("scale %s: %d → %d replicas", c.Service, c.CurrentReplicas, c.DesiredReplicas)
	}
	return ""
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
}

// PlanDeploy computes the plan of deploying in.Manifest, with the deploy
// chain's own code: the operator's limits (a manifest over one is a
// non-retryable InvalidManifest), the hostname check, the declared IPs, a dry-run
// server-side apply of the rendered objects, and the classification of each
// service. Conflicts fail it the way they would fail the deploy.
func (a *Activities) PlanDeploy(ctx context.Context, in PlanInput) (*DeployPlan, error) {
	// The operator's limits, before anything is read or written (issue
	// 20.4): a manifest over one is refused naming the field and the limit.
	limits := a.Limits
	limits.PrometheusLabel = a.PrometheusLabel
	if err := in.Manifest.CheckLimits(limits); err != nil {
		return nil, invalidManifest(err)
	}
	if err := in.Manifest.CheckReservedKeys(a.ReservedPrefixes, a.AllowedPodKeys); err != nil {
		return nil, invalidManifest(err)
	}
	m := in.Manifest.WithDefaults()
	p := &DeployPlan{Lease: m.Lease, Owner: in.Owner}
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
	objs, err := RenderObjects(m, ips, check.Withheld)
	if err != nil {
		return nil, invalidInput("%v", err)
	}
	_, err = a.Kube.CoreV1().Namespaces().Get(ctx, objs.Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		for _, s := range objs.Services {
			p.Objects = append(p.Objects, "Service/"+s.Name)
		}
		if objs.Ingress != nil {
			p.Objects = append(p.Objects, "Ingress/"+objs.Ingress.Name)
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
		c, err := a.ClassifyService(ctx, ClassifyInput{Deployment: d, Service: svc})
		if err != nil {
			return nil, err
		}
		if c.Class == ChangeNone && touches(p.Objects, p.Prune, m, svc) {
			c.Class = ChangeMetadata
		}
		p.Services = append(p.Services, *c)
		st, err := a.ReadRolloutState(ctx, ServiceRef{Namespace: objs.Namespace, Service: svc})
		if err != nil {
			return nil, err
		}
		digests = append(digests, svc+"="+st.Digest)
	}
	p.Operations = Operations(p.ReserveHostnames, p.AllocateIPs, p.Objects, p.Prune, p.Services, p.ReleaseHostnames, p.ReleaseIPs)
	p.Tree = Tree(p, m)
	p.Summary = summarize(p)
	p.Fingerprint = fingerprint(held, declared, p.Objects, p.Prune, digests, p.Tree.Fingerprint())
	return p, nil
}

// Tree is the deploy of m that p plans, as the tree of operations the
// lease's workflow executes in this order: check the lease; the writes
// before the rollouts (one step: IPs, hostnames, namespace, Services,
// Ingress); each changed service's rollout, in parallel, with a canary's
// steps under it; and, once healthy, the release of what m dropped.
func Tree(p *DeployPlan, m *manifest.Manifest) *plan.Node {
	root := plan.New(plan.OpDeploy, p.Lease, "deploy lease "+p.Lease)
	root.Add(plan.New(plan.OpCheckLease, p.Lease, "check that lease "+p.Lease+" is active"))
	apply := plan.New(plan.OpApply, manifest.Namespace(p.Lease), "reserve and apply, in namespace "+manifest.Namespace(p.Lease))
	for _, e := range p.AllocateIPs {
		apply.Add(plan.New(plan.OpAllocateIP, e, OpAllocateIP(e)))
	}
	for _, h := range p.ReserveHostnames {
		apply.Add(plan.New(plan.OpReserveHostname, h, OpReserveHostname(h)))
	}
	for _, o := range p.Objects {
		apply.Add(plan.New(plan.OpApplyObject, o, OpApply(o)))
	}
	for _, o := range p.Prune {
		apply.Add(plan.New(plan.OpDeleteObject, o, OpDelete(o)))
	}
	root.Add(apply)
	for _, c := range p.Services {
		root.Add(ServiceNode(c, m))
	}
	release := plan.New(plan.OpRelease, p.Lease, "release what the manifest no longer declares, once healthy")
	for _, h := range p.ReleaseHostnames {
		release.Add(plan.New(plan.OpReleaseHostname, h, OpReleaseHostname(h)))
	}
	for _, e := range p.ReleaseIPs {
		release.Add(plan.New(plan.OpReleaseIP, e, OpReleaseIP(e)))
	}
	return root.Add(release)
}

// ServiceNode is what the deploy does to one service, classified as c: a
// rollout (a canary's steps under it, when there is a running version to
// compare with), a scale, or nothing (nil).
func ServiceNode(c Classification, m *manifest.Manifest) *plan.Node {
	text := OpService(c)
	switch c.Class {
	case ChangeScale:
		return plan.New(plan.OpScale, c.Service, text)
	case ChangeRollout:
	default:
		return nil
	}
	n := plan.New(plan.OpRollOut, c.Service, text)
	s, ok := m.Lookup(c.Service)
	if !ok || s.Rollout == nil || c.CurrentImage == "" {
		return n // a first deploy has nothing to compare with or switch from
	}
	if s.Rollout.Strategy == manifest.StrategyBlueGreen {
		steps := s.Rollout.BlueGreen.Steps(c.Service, c.DesiredImage, c.DesiredReplicas)
		n.Text += " (blue-green)"
		for i, step := range steps {
			n.Add(plan.New(plan.OpBlueGreenStep, strconv.Itoa(i+1), fmt.Sprintf("step %d/%d: %s", i+1, len(steps), step.Text)))
		}
		return n
	}
	if s.Rollout.Strategy != manifest.StrategyCanary || len(s.Rollout.Steps) == 0 {
		return n
	}
	n.Text += fmt.Sprintf(" (canary, %d steps)", len(s.Rollout.Steps))
	if a := s.Rollout.Analysis; a != nil {
		n.Add(plan.New(plan.OpBackground, c.Service, "background "+a.String()+", while the steps run"))
	}
	for i, step := range s.Rollout.Steps {
		n.Add(plan.New(plan.OpCanaryStep, strconv.Itoa(i+1), fmt.Sprintf("step %d/%d: %s", i+1, len(s.Rollout.Steps), step)))
	}
	return n
}

// Operations lists a deploy's operations in the order the chain runs them.
func Operations(reserve, allocate, objects, prune []string, services []Classification, releaseHosts, releaseIPs []string) []string {
	var ops []string
	for _, e := range allocate {
		ops = append(ops, OpAllocateIP(e))
	}
	for _, h := range reserve {
		ops = append(ops, OpReserveHostname(h))
	}
	for _, o := range objects {
		ops = append(ops, OpApply(o))
	}
	for _, o := range prune {
		ops = append(ops, OpDelete(o))
	}
	for _, c := range services {
		if op := OpService(c); op != "" {
			ops = append(ops, op)
		}
	}
	for _, h := range releaseHosts {
		ops = append(ops, OpReleaseHostname(h))
	}
	for _, e := range releaseIPs {
		ops = append(ops, OpReleaseIP(e))
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
