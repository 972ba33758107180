package workflows

import (
	"errors"
	"reflect"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/manifest"
)

const (
	defaultHealthInterval = 30 * time.Second
	defaultDegradedAfter  = 60 * time.Second
	maxHistoryRecords     = 20
)

// deployRun is one DeployWorkflow run's state; only the workflow goroutine
// and its handlers touch it.
type deployRun struct {
	ctx            workflow.Context
	in             DeployInput
	lease          string
	trigger        string
	healthInterval time.Duration
	degradedAfter  time.Duration

	owner          string
	phase          string
	revision       int64
	current        *manifest.Manifest // being deployed, or last deployed
	lastGood       *manifest.Manifest
	pending        *manifest.Manifest
	teardown       bool
	history        []DeployRecord
	lastErr        string
	classes        map[string]string
	hostnames      []string
	withheld       []activities.Withheld
	ips            map[string]string
	unhealthySince time.Time
	unsettled      bool
}

// DeployRecord is one deploy of a lease, for `deployflow history`.
type DeployRecord struct {
	Revision int64                 `json:"revision"`
	Trigger  string                `json:"trigger"`
	Started  time.Time             `json:"started"`
	Finished time.Time             `json:"finished"`
	Outcome  string                `json:"outcome"`
	Image    map[string]string     `json:"images,omitempty"`
	Classes  map[string]string     `json:"classes,omitempty"`
	Withheld []activities.Withheld `json:"withheld,omitempty"`
}

// DeployStatus is the "status" query's answer and DeployWorkflow's result.
type DeployStatus struct {
	Lease     string                `json:"lease"`
	Owner     string                `json:"owner,omitempty"`
	Namespace string                `json:"namespace"`
	Phase     string                `json:"phase"`
	Revision  int64                 `json:"revision"`
	Pending   bool                  `json:"pending"`
	LastError string                `json:"lastError,omitempty"`
	Services  []string              `json:"services,omitempty"`
	Classes   map[string]string     `json:"classes,omitempty"`
	Hostnames []string              `json:"hostnames,omitempty"`
	Withheld  []activities.Withheld `json:"withheld,omitempty"`
	IPs       map[string]string     `json:"ips,omitempty"`
	History   []DeployRecord        `json:"history,omitempty"`
}

func newDeployRun(ctx workflow.Context, in DeployInput) *deployRun {
	w := &deployRun{
		ctx: ctx, in: in, lease: in.Manifest.Lease, trigger: in.Trigger,
		healthInterval: time.Duration(in.HealthIntervalSeconds) * time.Second,
		degradedAfter:  time.Duration(in.DegradedAfterSeconds) * time.Second,
	}
	if w.trigger == "" {
		w.trigger = "api"
	}
	if w.healthInterval <= 0 {
		w.healthInterval = defaultHealthInterval
	}
	if w.degradedAfter <= 0 {
		w.degradedAfter = defaultDegradedAfter
	}
	if c := in.Carry; c != nil {
		w.owner, w.phase, w.revision = c.Owner, c.Phase, c.Revision
		w.lastGood, w.pending, w.history, w.teardown = c.LastGood, c.Pending, c.History, c.Teardown
		w.lastErr, w.classes, w.hostnames, w.withheld, w.ips = c.LastError, c.Classes, c.Hostnames, c.Withheld, c.IPs
		w.current = w.lastGood
	} else {
		m := in.Manifest
		w.pending = &m
	}
	return w
}

func (w *deployRun) registerControls() error {
	if err := workflow.SetQueryHandlerWithOptions(w.ctx, QueryDeploy, func() (DeployStatus, error) {
		return w.status(), nil
	}, workflow.QueryHandlerOptions{Description: "The lease's phase, deploys, reservations and change classes"}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(w.ctx, UpdateDeploy,
		func(_ workflow.Context, m manifest.Manifest) (DeployStatus, error) {
			w.pending = &m // the newest manifest wins; older pending ones are dropped
			w.unsettled = true
			return w.status(), nil
		},
		workflow.UpdateHandlerOptions{
			Description: "Deploy a manifest to this lease (supersedes a deploy in progress)",
			Validator: func(_ workflow.Context, m manifest.Manifest) error {
				if m.Lease != w.lease {
					return errors.New("lease: the manifest is for lease " + m.Lease + ", this workflow deploys lease " + w.lease)
				}
				if w.teardown || w.phase == PhaseTearingDown || w.phase == PhaseTornDown {
					return errors.New("the lease is being torn down; start a new deploy once it is gone")
				}
				return m.Validate()
			},
		}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(w.ctx, UpdateTeardown,
		func(workflow.Context) (DeployStatus, error) {
			w.teardown = true
			w.unsettled = true
			return w.status(), nil
		},
		workflow.UpdateHandlerOptions{Description: "Tear the lease's workload down and release its hostnames and IPs"}); err != nil {
		return err
	}
	ch := workflow.GetSignalChannel(w.ctx, SignalTeardown)
	workflow.Go(w.ctx, func(ctx workflow.Context) {
		for {
			ch.Receive(ctx, nil)
			w.teardown = true
		}
	})
	return nil
}

func (w *deployRun) status() DeployStatus {
	st := DeployStatus{
		Lease: w.lease, Owner: w.owner, Namespace: manifest.Namespace(w.lease), Phase: w.phase,
		Revision: w.revision, Pending: w.pending != nil, LastError: w.lastErr, Classes: w.classes,
		Hostnames: w.hostnames, Withheld: w.withheld, IPs: w.ips, History: w.history,
	}
	if w.current != nil {
		st.Services = w.current.ServiceNames()
	}
	return st
}

func (w *deployRun) carryOver() DeployInput {
	in := w.in
	if w.current != nil {
		in.Manifest = *w.current
	}
	in.Carry = &DeployCarry{
		Owner: w.owner, Phase: w.phase, LastGood: w.lastGood, Pending: w.pending,
		Revision: w.revision, History: w.history, Teardown: w.teardown,
		LastError: w.lastErr, Classes: w.classes, Hostnames: w.hostnames, Withheld: w.withheld, IPs: w.ips,
	}
	return in
}

func (w *deployRun) record(r DeployRecord) {
	w.history = append(w.history, r)
	if len(w.history) > maxHistoryRecords {
		w.history = w.history[len(w.history)-maxHistoryRecords:]
	}
}

// historyFull asks for continue-as-new while idle (health ticks add up).
func (w *deployRun) historyFull() bool {
	info := workflow.GetInfo(w.ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > continueAsNewAfter
}

// settle records accepted updates in a task of their own before the run
// ends (see rolloutRun.settleControls).
func (w *deployRun) settle() {
	_ = workflow.Await(w.ctx, func() bool { return workflow.AllHandlersFinished(w.ctx) })
	if w.unsettled {
		_ = workflow.Sleep(w.ctx, time.Millisecond)
		w.unsettled = false
	}
}

// kubeCtx is for short, idempotent calls (local activities, retried for a
// day: an unreachable API server delays a deploy, it does not fail it).
func (w *deployRun) kubeCtx(summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(w.ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy:            kubeRetry,
		Summary:                summary,
	})
}

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
	var health []activities.ServiceHealth
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

// setPhase records the lease's phase (and exports it as a metric).
func (w *deployRun) setPhase(phase string) {
	if w.phase == phase {
		return
	}
	w.phase = phase
	var a *activities.Activities
	_ = workflow.ExecuteLocalActivity(w.probeCtx("phase "+phase), a.ReportPhase, activities.PhaseReport{Lease: w.lease, Phase: phase}).Get(w.ctx, nil)
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

func images(m *manifest.Manifest) map[string]string {
	out := map[string]string{}
	for _, s := range m.Services {
		out[s.Name] = s.Image
	}
	return out
}

func sameManifest(a, b *manifest.Manifest) bool {
	return reflect.DeepEqual(a.WithDefaults(), b.WithDefaults())
}
