package activities

import (
	"context"

	"github.com/deployflow/deployflow/internal/manifest"
)

// The deploy chain's steps as three calls (issue 11.3): each is one local
// activity, so one history event, instead of one event per read or write.
// Every call they make is idempotent on its own, so retrying a whole step
// after a failure part-way through is safe: what was done is found done.

// PrepareDeployInput is the deploy chain's first step: the lease and the
// plan of deploying Manifest.
type PrepareDeployInput struct {
	Manifest manifest.Manifest `json:"manifest"`
}

// PrepareDeployResult is the lease (active) and the deploy's plan.
type PrepareDeployResult struct {
	Lease LeaseInfo  `json:"lease"`
	Plan  DeployPlan `json:"plan"`
}

// PrepareDeploy checks that the lease is active (CheckLease) and computes
// the deploy's plan with the lease's owner (PlanDeploy). It writes nothing.
func (a *Activities) PrepareDeploy(ctx context.Context, in PrepareDeployInput) (*PrepareDeployResult, error) {
	if err := requireDefaults("PrepareDeploy", &in.Manifest); err != nil {
		return nil, err
	}
	l, err := a.CheckLease(ctx, in.Manifest.Lease)
	if err != nil {
		return nil, err
	}
	p, err := a.PlanDeploy(ctx, PlanInput{Manifest: in.Manifest, Owner: l.Owner})
	if err != nil {
		return nil, err
	}
	return &PrepareDeployResult{Lease: *l, Plan: *p}, nil
}

// ApplyDeployInput is the deploy chain's writes before its rollouts.
type ApplyDeployInput struct {
	Manifest manifest.Manifest `json:"manifest"`
	Owner    string            `json:"owner"`
	// DeployID and Previous are ApplyObjectsInput's.
	DeployID string   `json:"deployID"`
	Previous []string `json:"previous,omitempty"`
}

// ApplyDeployResult is what ApplyDeploy holds and changed, and each
// service's change class, in the manifest's order.
type ApplyDeployResult struct {
	IPs       map[string]string   `json:"ips"`
	Hostnames *HostnamesResult    `json:"hostnames"`
	Applied   *ApplyObjectsResult `json:"applied"`
	Classes   []Classification    `json:"classes"`
	// TrafficRoutes are, per service whose rollout sets route weights
	// (--routing gateway, manifest.Service.RouteWeighted: a canary's
	// steps, a blue-green's switch), its HTTPRoutes.
	TrafficRoutes map[string][]string `json:"trafficRoutes,omitempty"`
}

// ApplyDeploy reserves the manifest's declared IPs (EnsureIPs) and
// hostnames (ReserveHostnames), ensures the lease's namespace, applies its
// Services and Ingress (ApplyObjects) and classifies each service's change
// (ClassifyService): everything a deploy writes before its rollouts. A
// manifest that cannot be rendered is a non-retryable InvalidManifest.
func (a *Activities) ApplyDeploy(ctx context.Context, in ApplyDeployInput) (*ApplyDeployResult, error) {
	m := &in.Manifest
	if err := requireDefaults("ApplyDeploy", m); err != nil {
		return nil, err
	}
	out := &ApplyDeployResult{}
	var err error
	if out.IPs, err = a.EnsureIPs(ctx, IPsInput{Lease: m.Lease, Owner: in.Owner, Endpoints: m.IPEndpoints()}); err != nil {
		return nil, err
	}
	hosts, err := a.ReserveHostnames(ctx, HostnamesInput{Lease: m.Lease, Owner: in.Owner, Hostnames: m.Hostnames()})
	if err != nil {
		return nil, err
	}
	out.Hostnames = hosts
	ns, err := a.ensureNamespace(ctx, EnsureNamespaceInput{
		Name:   manifest.Namespace(m.Lease),
		Labels: map[string]string{manifest.LeaseLabel: m.Lease, manifest.ManagedByLabel: manifest.ManagedBy},
	})
	if err != nil {
		return nil, err
	}
	if err := a.applySecrets(ctx, m); err != nil {
		return nil, err
	}
	objects, err := a.renderObjects(m, out.IPs, hosts.Withheld)
	if err != nil {
		return nil, invalidManifest(err)
	}
	objects.DeployID, objects.Previous, objects.namespace = in.DeployID, in.Previous, ns
	applied, err := a.ApplyObjects(ctx, objects)
	if err != nil {
		return nil, err
	}
	out.Applied = applied
	for _, r := range objects.HTTPRoutes {
		if svc := r.Labels[manifest.ServiceLabel]; svc != "" {
			if s, ok := m.Lookup(svc); ok && s.RouteWeighted() {
				if out.TrafficRoutes == nil {
					out.TrafficRoutes = map[string][]string{}
				}
				out.TrafficRoutes[svc] = append(out.TrafficRoutes[svc], r.Name)
			}
		}
	}
	for _, svc := range m.ServiceNames() {
		d, err := m.Deployment(svc)
		if err != nil {
			return nil, invalidManifest(err)
		}
		cin, err := classifyInput(m, svc, d)
		if err != nil {
			return nil, err
		}
		c, err := a.ClassifyService(ctx, cin)
		if err != nil {
			return nil, err
		}
		out.Classes = append(out.Classes, *c)
	}
	return out, nil
}

// FinishDeployInput is the deploy chain's last step, once the new version
// is healthy: what the lease keeps, and the deploy to report.
type FinishDeployInput struct {
	Lease         string   `json:"lease"`
	KeepHostnames []string `json:"keepHostnames,omitempty"`
	KeepIPs       []string `json:"keepIPs,omitempty"`
	// Report, if set, is exported as the deploy's duration (ReportDeploy).
	Report *DeployReport `json:"report,omitempty"`
}

// FinishDeployResult is what FinishDeploy released.
type FinishDeployResult struct {
	Hostnames []string `json:"hostnames,omitempty"`
	IPs       []string `json:"ips,omitempty"`
}

// FinishDeploy releases the hostnames (ReleaseHostnames) and IPs
// (ReleaseIPs) the manifest no longer declares and reports the deploy.
func (a *Activities) FinishDeploy(ctx context.Context, in FinishDeployInput) (*FinishDeployResult, error) {
	var out FinishDeployResult
	var err error
	if out.Hostnames, err = a.ReleaseHostnames(ctx, ReleaseInput{Lease: in.Lease, Keep: in.KeepHostnames}); err != nil {
		return nil, err
	}
	if out.IPs, err = a.ReleaseIPs(ctx, ReleaseInput{Lease: in.Lease, Keep: in.KeepIPs}); err != nil {
		return nil, err
	}
	if in.Report != nil {
		_ = a.ReportDeploy(ctx, *in.Report)
	}
	return &out, nil
}
