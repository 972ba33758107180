package lease

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/searchattr"
)

// What a lease shows: the status query's answer, its history records, and
// its search attributes, summary and details in the Temporal UI.

func (w *deployRun) status() api.DeployStatus {
	st := api.DeployStatus{
		Lease: w.lease, Owner: w.Owner, Namespace: manifest.Namespace(w.lease), Phase: w.Phase,
		Revision: w.Revision, Pending: w.Pending != nil, LastError: w.LastError, Classes: w.Classes,
		Hostnames: w.Hostnames, Withheld: w.Withheld, IPs: w.IPs, History: w.History, Plan: w.Plan,
	}
	if w.current != nil {
		st.Services = w.current.ServiceNames()
	}
	st.LastGood = w.LastGood
	st.RollbackTargets, st.Rejected, st.Refusals = w.rollbackTargets(), w.Rejected, w.Refusals
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
	if w.Batches() {
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
	if w.Batches() {
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
