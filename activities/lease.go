package activities

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.temporal.io/sdk/temporal"

	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/internal/reserve"
)

// Error types of the deploy chain's non-retryable failures.
const (
	ErrLeaseNotActive   = "LeaseNotActive"
	ErrHostnameConflict = "HostnameConflict"
	ErrHostnameBlocked  = "HostnameBlocked"
	ErrIPPoolExhausted  = "IPPoolExhausted"
)

// LeaseInfo is what the deploy chain knows of a lease.
type LeaseInfo struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	State string `json:"state"`
}

// CheckLease returns the lease if it is active. A closed or unknown lease is
// a non-retryable LeaseNotActive; a store that cannot be reached is an
// ordinary error, retried — never read as "the lease is gone".
func (a *Activities) CheckLease(ctx context.Context, id string) (*LeaseInfo, error) {
	l, err := a.Leases.Get(ctx, id)
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("lease %s does not exist: create it with 'deployflow lease create %s --owner <owner>'", id, id),
			ErrLeaseNotActive, nil)
	case err != nil:
		return nil, fmt.Errorf("read lease %s: %w", id, err)
	case !l.Active():
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("lease %s is %s: a closed lease cannot be deployed to", id, l.State), ErrLeaseNotActive, nil)
	}
	return &LeaseInfo{ID: l.ID, Owner: l.Owner, State: string(l.State)}, nil
}

// HostnamesInput is a lease's desired hostnames.
type HostnamesInput struct {
	Lease     string   `json:"lease"`
	Owner     string   `json:"owner"`
	Hostnames []string `json:"hostnames"`
}

// Withheld is a hostname left with the same owner's other lease.
type Withheld struct {
	Hostname string `json:"hostname"`
	Lease    string `json:"lease"`
}

// HostnamesResult is what the lease holds of the hostnames it asked for.
type HostnamesResult struct {
	Reserved []string   `json:"reserved,omitempty"`
	Withheld []Withheld `json:"withheld,omitempty"`
}

// CheckHostnames reads, without writing, whether the lease may have its
// hostnames: another owner's hostname is a non-retryable HostnameConflict
// naming the host and its holder, a blocked one HostnameBlocked.
func (a *Activities) CheckHostnames(ctx context.Context, in HostnamesInput) (*HostnamesResult, error) {
	res, err := a.Hostnames.Check(ctx, in.Lease, in.Owner, in.Hostnames)
	return a.hostnamesResult(res, err)
}

// ReserveHostnames reserves the lease's hostnames (idempotent; never takes
// one over from another lease).
func (a *Activities) ReserveHostnames(ctx context.Context, in HostnamesInput) (*HostnamesResult, error) {
	res, err := a.Hostnames.Reserve(ctx, in.Lease, in.Owner, in.Hostnames)
	out, err := a.hostnamesResult(res, err)
	if err == nil && a.Metrics != nil {
		a.Metrics.HostnamesWithheld.Add(float64(len(out.Withheld)))
	}
	return out, err
}

func (a *Activities) hostnamesResult(res reserve.HostnameResult, err error) (*HostnamesResult, error) {
	var conflict *reserve.ConflictError
	var blocked *reserve.BlockedError
	switch {
	case errors.As(err, &conflict):
		if a.Metrics != nil {
			a.Metrics.HostnameConflicts.Inc()
		}
		return nil, temporal.NewNonRetryableApplicationError(conflict.Error()+": pick another hostname, or have that owner release it",
			ErrHostnameConflict, nil, conflict.Hostname, conflict.HolderLease, conflict.HolderOwner)
	case errors.As(err, &blocked):
		return nil, temporal.NewNonRetryableApplicationError(blocked.Error()+": pick another hostname", ErrHostnameBlocked, nil, blocked.Hostname)
	case errors.Is(err, reserve.ErrInvalidHostname):
		return nil, invalidInput("%v", err)
	case err != nil:
		return nil, err
	}
	out := &HostnamesResult{Reserved: res.Reserved}
	for _, w := range res.Withheld {
		out.Withheld = append(out.Withheld, Withheld{Hostname: w.Hostname, Lease: w.Lease})
	}
	return out, nil
}

// ReleaseInput names what a lease keeps; everything else it holds of that
// kind is released. An empty Keep releases everything.
type ReleaseInput struct {
	Lease string   `json:"lease"`
	Keep  []string `json:"keep,omitempty"`
	// Only, if not empty, are the only ones released (of those the lease
	// holds, not in Keep): what one deploy took. (A deploy that took
	// nothing releases nothing: it does not call.)
	Only []string `json:"only,omitempty"`
}

// dropped is what in releases of held.
func (in ReleaseInput) dropped(held []string) []string {
	drop := without(held, in.Keep)
	if len(in.Only) > 0 {
		drop = without(drop, without(drop, in.Only))
	}
	return drop
}

// ReleaseHostnames releases the lease's hostnames not in Keep (of Only, if
// any) and returns them.
func (a *Activities) ReleaseHostnames(ctx context.Context, in ReleaseInput) ([]string, error) {
	held, err := a.Hostnames.Held(ctx, in.Lease)
	if err != nil {
		return nil, err
	}
	drop := in.dropped(held)
	if len(in.Keep) == 0 && len(in.Only) == 0 {
		return drop, a.Hostnames.ReleaseAll(ctx, in.Lease)
	}
	return drop, a.Hostnames.Release(ctx, in.Lease, drop)
}

// IPsInput is a lease's declared IP endpoints.
type IPsInput struct {
	Lease     string   `json:"lease"`
	Owner     string   `json:"owner"`
	Endpoints []string `json:"endpoints"`
}

// EnsureIPs returns endpoint → IP for the lease's endpoints: existing ones
// keep their address, new ones get one from the pool (Akash GetDeclaredIPs
// and reservation). An exhausted pool is a non-retryable IPPoolExhausted.
func (a *Activities) EnsureIPs(ctx context.Context, in IPsInput) (map[string]string, error) {
	if len(in.Endpoints) == 0 {
		return map[string]string{}, nil
	}
	ips, err := a.IPs.Ensure(ctx, in.Lease, in.Owner, in.Endpoints)
	var exhausted *reserve.PoolExhaustedError
	if errors.As(err, &exhausted) {
		return nil, temporal.NewNonRetryableApplicationError(exhausted.Error()+": release IPs or widen the pool", ErrIPPoolExhausted, nil)
	}
	return ips, err
}

// ReleaseIPs releases the lease's IP endpoints not in Keep (of Only, if
// any) and returns them.
func (a *Activities) ReleaseIPs(ctx context.Context, in ReleaseInput) ([]string, error) {
	declared, err := a.IPs.Declared(ctx, in.Lease)
	if err != nil {
		return nil, err
	}
	endpoints := make([]string, 0, len(declared))
	for e := range declared {
		endpoints = append(endpoints, e)
	}
	sort.Strings(endpoints)
	drop := in.dropped(endpoints)
	if len(in.Keep) == 0 && len(in.Only) == 0 {
		return drop, a.IPs.ReleaseAll(ctx, in.Lease)
	}
	return drop, a.IPs.Release(ctx, in.Lease, drop)
}

func without(all, keep []string) []string {
	k := map[string]bool{}
	for _, s := range keep {
		k[s] = true
	}
	var out []string
	for _, s := range all {
		if !k[s] {
			out = append(out, s)
		}
	}
	return out
}

// PhaseReport is a lease's new phase.
type PhaseReport struct {
	Lease string `json:"lease"`
	Phase string `json:"phase"`
}

// ReportPhase is a no-op kept for the lease workflows that schedule it:
// deployflow_leases is now counted fleet-wide from Temporal visibility
// (metrics.LeasesCollector), since one worker's view of the leases it
// happened to run was wrong with several workers and after a restart.
func (a *Activities) ReportPhase(context.Context, PhaseReport) error { return nil }

// DeployReport is a finished deploy.
type DeployReport struct {
	Lease   string  `json:"lease"`
	Seconds float64 `json:"seconds"`
	Result  string  `json:"result"`
}

// ReportDeploy exports a finished deploy's duration.
func (a *Activities) ReportDeploy(_ context.Context, in DeployReport) error {
	if a.Metrics != nil {
		a.Metrics.DeployDuration.WithLabelValues(in.Result).Observe(in.Seconds)
	}
	return nil
}
