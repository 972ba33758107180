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
	Key      string                `json:"key,omitempty"` // the request's (DeployRequest.Key)
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
	// DeployingKey is the key of the deploy in progress or pending
	// (DeployRequest.Key), if it has one.
	DeployingKey string `json:"deployingKey,omitempty"`
	// LastGood is the last-known-good manifest: what a placement returns
	// this cluster to if a later wave fails.
	LastGood *manifest.Manifest `json:"lastGood,omitempty"`
}

func (w *deployRun) status() DeployStatus {
	st := DeployStatus{
		Lease: w.lease, Owner: w.Owner, Namespace: manifest.Namespace(w.lease), Phase: w.Phase,
		Revision: w.Revision, Pending: w.Pending != nil, LastError: w.LastError, Classes: w.Classes,
		Hostnames: w.Hostnames, Withheld: w.Withheld, IPs: w.IPs, History: w.History, Plan: w.Plan,
	}
	if w.current != nil {
		st.Services = w.current.ServiceNames()
	}
	st.LastGood = w.LastGood
	switch {
	case w.Pending != nil:
		st.DeployingKey = w.PendingKey
	case w.requested != nil:
		st.DeployingKey = w.key
	}
	st.Tree = w.tree
	if st.Tree == nil && len(w.History) > 0 {
		st.Tree = w.History[len(w.History)-1].Tree
	}
	return st
}

// setPhase records the lease's phase: in the status, in the search
// attributes (temporal workflow list --query 'DeployflowPhase="Failed"'), in
// the workflow's details shown by the UI, and as a metric.
func (w *deployRun) setPhase(phase string) {
	if w.Phase == phase {
		return
	}
	w.Phase = phase
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
		searchattr.Phase.ValueSet(w.Phase),
		searchattr.Revision.ValueSet(w.Revision),
		searchattr.Trigger.ValueSet(w.trigger),
		searchattr.Namespace.ValueSet(manifest.Namespace(w.lease)),
	}
	if w.Owner != "" {
		updates = append(updates, searchattr.Owner.ValueSet(w.Owner))
	}
	if w.current != nil {
		updates = append(updates, searchattr.Services.ValueSet(w.current.ServiceNames()))
	}
	workflow.SetCurrentDetails(w.ctx, w.details())
	if w.batches() {
		if w.searchAttributes() == w.Published {
			return // nothing changed: no upsert, no event
		}
		w.Published = w.searchAttributes()
	}
	if err := workflow.UpsertTypedSearchAttributes(w.ctx, updates...); err != nil {
		workflow.GetLogger(w.ctx).Warn("search attributes not upserted (are they registered?)", "error", err)
	}
}

// searchAttributes is the values publish upserts, as one comparable string.
func (w *deployRun) searchAttributes() string {
	values := fmt.Sprintf("%q %q %d %q %q", w.lease, w.Phase, w.Revision, w.trigger, w.Owner)
	if w.current != nil {
		values += fmt.Sprintf(" %q", w.current.ServiceNames())
	}
	return values
}

// details is the UI's "current details" of the lease: markdown.
func (w *deployRun) details() string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** — lease `%s`", w.Phase, w.lease)
	if w.Owner != "" {
		fmt.Fprintf(&b, " of `%s`", w.Owner)
	}
	fmt.Fprintf(&b, ", deploy #%d (%s)\n\n", w.Revision, w.trigger)
	if w.current != nil {
		for _, s := range w.current.Services {
			class := w.Classes[s.Name]
			if class == "" {
				class = "pending"
			}
			fmt.Fprintf(&b, "- %s: `%s` — %s\n", s.Name, s.Image, class)
		}
	}
	if w.LastError != "" {
		fmt.Fprintf(&b, "\nlast error: %s\n", w.LastError)
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
