package workflows

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/observe"
	"github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/internal/searchattr"
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
	requested      *manifest.Manifest // the manifest of the deploy in progress, as it was asked for
	lastGood       *manifest.Manifest
	pending        *manifest.Manifest
	pendingTrigger string
	pendingPlan    string // the fingerprint the pending manifest was approved with
	approvedPlan   string // the fingerprint the deploy in progress was approved with
	teardown       bool
	history        []DeployRecord
	lastErr        string
	classes        map[string]string
	hostnames      []string
	withheld       []activities.Withheld
	ips            map[string]string
	unhealthySince time.Time
	unsettled      bool
	plan           *activities.DeployPlan // of the deploy in progress or the last one
	tree           *plan.Node             // the chain in progress's tree, as executed so far
	nodes          map[string]*plan.Node  // the tree's node of each service's rollout
	approved       bool
	objects        []string           // the lease's Services and Ingress after the last apply
	reverting      bool               // the chain runs for the last-known-good manifest after a failure
	lastFailure    error              // why the last deploy failed, if it did
	lastFailed     *manifest.Manifest // the manifest of the last deploy, if it failed
	teardowns      workflow.ReceiveChannel
	redeploys      workflow.ReceiveChannel
	leaseGone      bool                 // the lease is unknown or closed and nothing of it is deployed
	events         bool                 // this run takes the observer's observations (versionLeaseEvents)
	idle           bool                 // waiting for work: observations are taken only then
	observation    *observe.Observation // accepted, not yet acted on
	// fewer: this run takes versionFewerEvents and every change before it.
	fewer bool
	// published is the search attributes last upserted (fewer-events
	// upserts only changes).
	published string
	// unsettledAt is the history length of the task that accepted the
	// update not yet settled.
	unsettledAt int
	// rollingOut: the deploy waits for its rollouts (a closed lease's
	// observation is taken then).
	rollingOut bool
	// deployStarted is when the deploy in progress started.
	deployStarted time.Time
}

// takes reports whether this run takes change id: always when it takes
// versionFewerEvents, else as its own gate says.
func (w *deployRun) takes(id string) bool { return w.fewer || gate(w.ctx, id) }

// deployID names one run of the deploy chain, for content-based change
// detection in ApplyObjects: a retried apply of the same run carries it.
func (w *deployRun) deployID() string {
	if w.reverting {
		return fmt.Sprintf("%d-revert", w.revision)
	}
	return fmt.Sprint(w.revision)
}

// ScaleServiceRequest is the "scale" update's argument.
type ScaleServiceRequest struct {
	Service  string `json:"service"`
	Replicas int32  `json:"replicas"`

	invalid error // a field unknown or of the wrong type (UnmarshalJSON)
}

// base is the manifest operator changes start from: the last-known-good
// one, or the last deployed.
func (w *deployRun) base() *manifest.Manifest {
	if w.lastGood != nil {
		return w.lastGood
	}
	return w.current
}

// redeploy queues the lease's last-known-good manifest again, restarted if
// asked. A lease with nothing deployed yet has nothing to redeploy.
func (w *deployRun) redeploy(req RedeployRequest) {
	if req.Action != RedeployRestart && req.Action != RedeployReapply && gate(w.ctx, versionStrictInput) {
		// A signal has no answer: what is wrong goes to the worker's log.
		workflow.GetLogger(w.ctx).Warn(fmt.Sprintf("redeploy signal ignored: action %q: want %s or %s", req.Action, RedeployRestart, RedeployReapply), "lease", w.lease)
		return
	}
	base := w.base()
	if base == nil || w.teardown {
		workflow.GetLogger(w.ctx).Warn("redeploy ignored: nothing deployed", "lease", w.lease, "action", req.Action)
		return
	}
	m := *base.WithDefaults()
	if req.Action == RedeployRestart {
		at := workflow.Now(w.ctx).UTC().Format(time.RFC3339)
		for i := range m.Services {
			if m.Services[i].PodAnnotations == nil {
				m.Services[i].PodAnnotations = map[string]string{}
			}
			m.Services[i].PodAnnotations[RestartedAtAnnotation] = at
		}
	}
	if w.pending == nil {
		w.pending = &m
		w.pendingTrigger = req.Trigger
		if checkTrigger("trigger", req.Trigger) != nil && gate(w.ctx, versionGuardedInput) {
			// A signal has no answer: a trigger that is not a short
			// printable word never reaches the search attributes.
			workflow.GetLogger(w.ctx).Warn("redeploy signal's trigger dropped", "lease", w.lease, "error", checkTrigger("trigger", req.Trigger))
			w.pendingTrigger = ""
		}
		if w.pendingTrigger == "" {
			w.pendingTrigger = "api"
		}
	}
}

// keepRestarts carries restart annotations of the running services into a
// new manifest that does not set them, as a Deployment keeps
// kubectl.kubernetes.io/restartedAt across applies: a new manifest is not a
// reason to restart again, nor to drop a restart.
func (w *deployRun) keepRestarts(m *manifest.Manifest) *manifest.Manifest {
	if w.current == nil {
		return m
	}
	out := *m.WithDefaults()
	for i, s := range out.Services {
		old, ok := w.current.Lookup(s.Name)
		at := old.PodAnnotations[RestartedAtAnnotation]
		if !ok || at == "" || s.PodAnnotations[RestartedAtAnnotation] != "" {
			continue
		}
		ann := map[string]string{RestartedAtAnnotation: at}
		for k, v := range s.PodAnnotations {
			ann[k] = v
		}
		out.Services[i].PodAnnotations = ann
	}
	return &out
}

// DeployRequest is the "deploy" update's argument.
type DeployRequest struct {
	Manifest manifest.Manifest `json:"manifest"`
	// PlanFingerprint, if set, is the plan the requester reviewed
	// (`deploy --plan --yes`): the deploy acts only if its own plan has this
	// fingerprint, and counts as approved (requireApproval); otherwise it is
	// aborted with nothing changed.
	PlanFingerprint string `json:"planFingerprint,omitempty"`
	// Trigger says who asked: cli, ui, schedule, api (the default).
	Trigger string `json:"trigger,omitempty"`

	invalid error // what is wrong with a request typed by hand (UnmarshalJSON)
}

func (r DeployRequest) trigger() string {
	if r.Trigger == "" {
		return "api"
	}
	return r.Trigger
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
	// Operations are what the deploy did, in the words of its plan.
	Operations []string `json:"operations,omitempty"`
	// Tree is the deploy's plan as executed: each operation's state.
	Tree *plan.Node `json:"tree,omitempty"`
	// Rollback is the return to the last-known-good manifest after a
	// failure, as executed.
	Rollback *plan.Node `json:"rollback,omitempty"`
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
	// Plan is the plan of the deploy in progress (awaiting approval, when
	// Phase is AwaitingApproval) or of the last one.
	Plan *activities.DeployPlan `json:"plan,omitempty"`
	// Tree is the tree of the deploy in progress, each operation's state
	// as it goes (or the last deploy's, as executed).
	Tree *plan.Node `json:"tree,omitempty"`
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
		w.pendingTrigger = c.PendingTrigger
		w.pendingPlan = c.PendingPlan
		w.lastErr, w.classes, w.hostnames, w.withheld, w.ips = c.LastError, c.Classes, c.Hostnames, c.Withheld, c.IPs
		w.objects = c.Objects
		w.current = w.lastGood
		w.published = c.Published
		w.plan = c.Plan
		w.lastFailed = c.LastFailed
	} else {
		m := in.Manifest
		w.pending = &m
		w.pendingTrigger = w.trigger
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
		func(_ workflow.Context, req DeployRequest) (DeployStatus, error) {
			if w.joins(req) {
				st := w.status()
				st.Revision-- // the deploy in progress is the caller's: it waits for the one after the last before it
				return st, nil
			}
			m := req.Manifest
			w.pending = &m // the newest manifest wins; older pending ones are dropped
			w.pendingTrigger = req.trigger()
			w.pendingPlan = req.PlanFingerprint
			w.unsettle()
			return w.status(), nil
		},
		workflow.UpdateHandlerOptions{
			Description: `Deploy a manifest to this lease (supersedes a deploy in progress). Argument: {"manifest": {...}, "trigger": "ui"}`,
			Validator: func(_ workflow.Context, req DeployRequest) error {
				if req.invalid != nil {
					return req.invalid
				}
				if err := checkTrigger("trigger", req.Trigger); err != nil {
					return err
				}
				if req.Manifest.Lease != w.lease {
					return errors.New("manifest.lease: the manifest is for lease " + req.Manifest.Lease + ", this workflow deploys lease " + w.lease)
				}
				if w.teardown || w.phase == PhaseTearingDown || w.phase == PhaseTornDown {
					return errors.New("the lease is being torn down; start a new deploy once it is gone")
				}
				return req.Manifest.Validate()
			},
		}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(w.ctx, UpdateTeardown,
		func(workflow.Context) (DeployStatus, error) {
			w.teardown = true
			w.unsettle()
			return w.status(), nil
		},
		workflow.UpdateHandlerOptions{Description: "Tear the lease's workload down and release its hostnames and IPs"}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(w.ctx, UpdateRetry,
		func(workflow.Context) (DeployStatus, error) {
			if w.lastFailed == nil { // a deploy ended between the validator and here
				return w.status(), errors.New("the last deploy of lease " + w.lease + " did not fail: there is nothing to retry")
			}
			m := *w.lastFailed
			w.pending, w.pendingTrigger, w.pendingPlan = &m, "retry", ""
			w.unsettle()
			return w.status(), nil
		},
		workflow.UpdateHandlerOptions{
			Description: "Deploy the manifest of the last deploy again, if it failed (an aborted canary, a failed analysis)",
			Validator: func(workflow.Context) error {
				switch {
				case w.teardown || w.phase == PhaseTearingDown || w.phase == PhaseTornDown:
					return errors.New("the lease is being torn down; start a new deploy once it is gone")
				case w.lastFailed == nil:
					return errors.New("the last deploy of lease " + w.lease + " did not fail: there is nothing to retry")
				case w.pending != nil || w.phase == PhaseDeploying || w.phase == PhaseAwaitingApproval:
					return errors.New("a deploy of lease " + w.lease + " is in progress or waiting: retry once it has ended")
				}
				return nil
			},
		}); err != nil {
		return err
	}
	if err := w.registerObserve(); err != nil {
		return err
	}
	if err := w.registerApproval(); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(w.ctx, UpdateScaleService,
		func(_ workflow.Context, req ScaleServiceRequest) (DeployStatus, error) {
			m := *w.base().WithDefaults()
			for i := range m.Services {
				if m.Services[i].Name == req.Service {
					r := req.Replicas
					m.Services[i].Replicas = &r
				}
			}
			w.pending, w.pendingTrigger = &m, "cli"
			w.unsettle()
			return w.status(), nil
		},
		workflow.UpdateHandlerOptions{
			Description: `Scale one service of the lease (a scale-only deploy). Argument: {"service": "web", "replicas": 6}`,
			Validator: func(_ workflow.Context, req ScaleServiceRequest) error {
				if req.invalid != nil {
					return req.invalid
				}
				if w.base() == nil {
					return errors.New("nothing is deployed to lease " + w.lease + " yet")
				}
				if _, ok := w.base().Lookup(req.Service); !ok {
					return fmt.Errorf("service %q: the lease runs %v", req.Service, w.base().ServiceNames())
				}
				if req.Replicas < 0 || req.Replicas > manifest.MaxReplicas {
					return fmt.Errorf("replicas: %d is out of range: use 0 to %d", req.Replicas, manifest.MaxReplicas)
				}
				return nil
			},
		}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(w.ctx, UpdateRestart,
		func(_ workflow.Context) (DeployStatus, error) {
			w.redeploy(RedeployRequest{Action: RedeployRestart, Trigger: "cli"})
			w.unsettle()
			return w.status(), nil
		},
		workflow.UpdateHandlerOptions{
			Description: "Restart every pod of the lease on a new revision of the same manifest",
			Validator: func(workflow.Context) error {
				if w.base() == nil {
					return errors.New("nothing is deployed to lease " + w.lease + " yet")
				}
				return nil
			},
		}); err != nil {
		return err
	}
	w.teardowns = workflow.GetSignalChannel(w.ctx, SignalTeardown)
	workflow.Go(w.ctx, func(ctx workflow.Context) {
		for {
			w.teardowns.Receive(ctx, nil)
			w.teardown = true
		}
	})
	w.redeploys = workflow.GetSignalChannel(w.ctx, SignalRedeploy)
	workflow.Go(w.ctx, func(ctx workflow.Context) {
		for {
			var req RedeployRequest
			w.redeploys.Receive(ctx, &req)
			w.redeploy(req)
		}
	})
	return nil
}

// drainSignals handles the signals delivered but not yet received.
func (w *deployRun) drainSignals() {
	for w.teardowns.ReceiveAsync(nil) {
		w.teardown = true
	}
	for {
		var req RedeployRequest
		if !w.redeploys.ReceiveAsync(&req) {
			return
		}
		w.redeploy(req)
	}
}

func (w *deployRun) status() DeployStatus {
	st := DeployStatus{
		Lease: w.lease, Owner: w.owner, Namespace: manifest.Namespace(w.lease), Phase: w.phase,
		Revision: w.revision, Pending: w.pending != nil, LastError: w.lastErr, Classes: w.classes,
		Hostnames: w.hostnames, Withheld: w.withheld, IPs: w.ips, History: w.history, Plan: w.plan,
	}
	if w.current != nil {
		st.Services = w.current.ServiceNames()
	}
	st.Tree = w.tree
	if st.Tree == nil && len(w.history) > 0 {
		st.Tree = w.history[len(w.history)-1].Tree
	}
	return st
}

func (w *deployRun) carryOver() DeployInput {
	in := w.in
	if w.current != nil {
		in.Manifest = *w.current
	}
	in.Carry = &DeployCarry{
		Owner: w.owner, Phase: w.phase, LastGood: w.lastGood, Pending: w.pending, PendingTrigger: w.pendingTrigger, PendingPlan: w.pendingPlan,
		Revision: w.revision, History: w.history, Teardown: w.teardown,
		LastError: w.lastErr, Classes: w.classes, Hostnames: w.hostnames, Withheld: w.withheld, IPs: w.ips,
		Objects: w.objects, Plan: w.plan, FewerEvents: w.fewer, Published: w.published, LastFailed: w.lastFailed,
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
	if w.unsettled && w.fewer && workflow.GetInfo(w.ctx).GetCurrentHistoryLength() > w.unsettledAt {
		w.unsettled = false // accepted in a task that has completed: recorded already
	}
	if w.unsettled {
		_ = workflow.Sleep(w.ctx, time.Millisecond)
		w.unsettled = false
	}
}

// unsettle notes an update handled in this workflow task.
func (w *deployRun) unsettle() {
	w.unsettled = true
	w.unsettledAt = workflow.GetInfo(w.ctx).GetCurrentHistoryLength()
}

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

// setPhase records the lease's phase: in the status, in the search
// attributes (temporal workflow list --query 'DeployflowPhase="Failed"'), in
// the workflow's details shown by the UI, and as a metric.
func (w *deployRun) setPhase(phase string) {
	if w.phase == phase {
		return
	}
	w.phase = phase
	w.publish()
	if w.fewer {
		return // deployflow_leases counts phases from visibility
	}
	var a *activities.Activities
	_ = workflow.ExecuteLocalActivity(w.probeCtx("phase "+phase), a.ReportPhase, activities.PhaseReport{Lease: w.lease, Phase: phase}).Get(w.ctx, nil)
}

// publish upserts the search attributes and the UI details.
func (w *deployRun) publish() {
	updates := []temporal.SearchAttributeUpdate{
		searchattr.Lease.ValueSet(w.lease),
		searchattr.Phase.ValueSet(w.phase),
		searchattr.Revision.ValueSet(w.revision),
		searchattr.Trigger.ValueSet(w.trigger),
		searchattr.Namespace.ValueSet(manifest.Namespace(w.lease)),
	}
	if w.owner != "" {
		updates = append(updates, searchattr.Owner.ValueSet(w.owner))
	}
	if w.current != nil {
		updates = append(updates, searchattr.Services.ValueSet(w.current.ServiceNames()))
	}
	workflow.SetCurrentDetails(w.ctx, w.details())
	if w.fewer {
		if w.searchAttributes() == w.published {
			return // nothing changed: no upsert, no event
		}
		w.published = w.searchAttributes()
	}
	if err := workflow.UpsertTypedSearchAttributes(w.ctx, updates...); err != nil {
		workflow.GetLogger(w.ctx).Warn("search attributes not upserted (are they registered?)", "error", err)
	}
}

// searchAttributes is the values publish upserts, as one comparable string.
func (w *deployRun) searchAttributes() string {
	values := fmt.Sprintf("%q %q %d %q %q", w.lease, w.phase, w.revision, w.trigger, w.owner)
	if w.current != nil {
		values += fmt.Sprintf(" %q", w.current.ServiceNames())
	}
	return values
}

// details is the UI's "current details" of the lease: markdown.
func (w *deployRun) details() string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** — lease `%s`", w.phase, w.lease)
	if w.owner != "" {
		fmt.Fprintf(&b, " of `%s`", w.owner)
	}
	fmt.Fprintf(&b, ", deploy #%d (%s)\n\n", w.revision, w.trigger)
	if w.current != nil {
		for _, s := range w.current.Services {
			class := w.classes[s.Name]
			if class == "" {
				class = "pending"
			}
			fmt.Fprintf(&b, "- %s: `%s` — %s\n", s.Name, s.Image, class)
		}
	}
	if w.lastErr != "" {
		fmt.Fprintf(&b, "\nlast error: %s\n", w.lastErr)
	}
	return b.String()
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

// joins reports whether a deploy request is for the deploy in progress: the
// same manifest, nothing pending, no plan or approval involved (a deploy
// bound to an approved plan may yet abort, and one awaiting approval may
// time out: a request joining either would be lost). It then joins that
// deploy rather than superseding it, which would cancel its rollouts and
// roll the same manifest out again. A start with an update (the CLI's
// update-with-start) hands the workflow the manifest twice, as its input and
// as the update; when the update comes in a later workflow task than the
// start (a loaded worker, a restart) the deploy of the input has begun.
func (w *deployRun) joins(req DeployRequest) bool {
	return w.phase == PhaseDeploying && !w.reverting && w.pending == nil && w.requested != nil &&
		req.PlanFingerprint == "" && w.approvedPlan == "" && !req.Manifest.RequireApproval &&
		sameManifest(w.requested, &req.Manifest) && gate(w.ctx, versionJoinSameManifest)
}

func sameManifest(a, b *manifest.Manifest) bool {
	return reflect.DeepEqual(a.WithDefaults(), b.WithDefaults())
}
