package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
	"github.com/deployflow/deployflow/internal/searchattr"
)

// What a lease shows: the status query's answer, its history records, and
// its search attributes, summary and details in the Temporal UI.

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

// setPhase records the lease's phase: in the status, in the search
// attributes (temporal workflow list --query 'DeployflowPhase="Failed"'), in
// the workflow's details shown by the UI, and as a metric.
func (w *deployRun) setPhase(phase string) {
	if w.phase == phase {
		return
	}
	w.phase = phase
	w.publish()
	if w.batches() {
		return // deployflow_leases counts phases from visibility
	}
	w.legacyReportPhase(phase)
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
	if w.batches() {
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

func images(m *manifest.Manifest) map[string]string {
	out := map[string]string{}
	for _, s := range m.Services {
		out[s.Name] = s.Image
	}
	return out
}
