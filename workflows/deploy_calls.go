package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/observe"
)

// The lease's calls into the cluster from the idle loop and teardown, each
// with its options: its local activities' budgets are here.

// kubeCtx is for short, idempotent calls (local activities, retried for a
// day: an unreachable API server delays a deploy, it does not fail it).
func (w *deployRun) kubeCtx(summary string) workflow.Context { return kubeCall(w.ctx, summary) }

// probeCtx is for the health monitor's observations: a few quick tries, then
// the tick reports Unknown instead of waiting for the cluster.
func (w *deployRun) probeCtx(summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(w.ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    5 * time.Second,
		ScheduleToCloseTimeout: 15 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
		Summary:                summary,
	})
}

func (w *deployRun) checkLease(id string) (*activities.LeaseInfo, error) {
	var a *activities.Activities
	var l activities.LeaseInfo
	err := workflow.ExecuteLocalActivity(w.kubeCtx("check lease "+id), a.CheckLease, id).Get(w.ctx, &l)
	return &l, err
}

// leaseActive is the monitor's lease check: (false, nil) only when the
// lease is known to be closed or gone; an error when it cannot be told.
func (w *deployRun) leaseActive() (bool, error) {
	var a *activities.Activities
	var l activities.LeaseInfo
	err := workflow.ExecuteLocalActivity(w.probeCtx("check lease "+w.lease), a.CheckLease, w.lease).Get(w.ctx, &l)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrLeaseNotActive {
		return false, nil
	}
	return err == nil, err
}

func (w *deployRun) checkHealth() (bool, error) {
	if w.current == nil {
		return true, nil
	}
	var a *activities.Activities
	var health []observe.ServiceHealth
	if err := workflow.ExecuteLocalActivity(w.probeCtx("check health"), a.CheckHealth, activities.HealthInput{
		Namespace: manifest.Namespace(w.lease), Services: w.current.ServiceNames(),
	}).Get(w.ctx, &health); err != nil {
		return false, err
	}
	for _, h := range health {
		if h.Available < h.Desired {
			return false, nil
		}
	}
	return true, nil
}

func (w *deployRun) deleteWorkloads() error {
	var a *activities.Activities
	ctx := workflow.WithActivityOptions(w.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy:         kubeRetry,
		Summary:             "delete namespace " + manifest.Namespace(w.lease),
	})
	return workflow.ExecuteActivity(ctx, a.DeleteNamespace, manifest.Namespace(w.lease)).Get(w.ctx, nil)
}

func (w *deployRun) releaseAll() error {
	var a *activities.Activities
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("release IPs"), a.ReleaseIPs, activities.ReleaseInput{Lease: w.lease}).Get(w.ctx, nil); err != nil {
		return err
	}
	w.ips = nil
	if err := workflow.ExecuteLocalActivity(w.kubeCtx("release hostnames"), a.ReleaseHostnames, activities.ReleaseInput{Lease: w.lease}).Get(w.ctx, nil); err != nil {
		return err
	}
	w.hostnames, w.withheld = nil, nil
	return nil
}

func (w *deployRun) reportDeploy(rec DeployRecord, err error) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	var a *activities.Activities
	_ = workflow.ExecuteLocalActivity(w.probeCtx("report deploy"), a.ReportDeploy, activities.DeployReport{
		Lease: w.lease, Seconds: rec.Finished.Sub(rec.Started).Seconds(), Result: result,
	}).Get(w.ctx, nil)
}
