// Package searchattr names deployflow's custom Temporal search attributes,
// so deploys can be found in the Temporal UI and with
// `temporal workflow list --query 'DeployflowPhase="Failed"'`.
package searchattr

import "go.temporal.io/sdk/temporal"

// The attributes upserted as a deploy moves.
var (
	Lease     = temporal.NewSearchAttributeKeyKeyword("DeployflowLease")
	Owner     = temporal.NewSearchAttributeKeyKeyword("DeployflowOwner")
	Services  = temporal.NewSearchAttributeKeyKeywordList("DeployflowServices")
	Phase     = temporal.NewSearchAttributeKeyKeyword("DeployflowPhase")
	Revision  = temporal.NewSearchAttributeKeyInt64("DeployflowRevision")
	Trigger   = temporal.NewSearchAttributeKeyKeyword("DeployflowTrigger")
	Namespace = temporal.NewSearchAttributeKeyKeyword("DeployflowNamespace")
)

// Registration lists every attribute as name=Type, the form of
// `temporal server start-dev --search-attribute` and
// `temporal operator search-attribute create`.
func Registration() []string {
	return []string{
		Lease.GetName() + "=Keyword",
		Owner.GetName() + "=Keyword",
		Services.GetName() + "=KeywordList",
		Phase.GetName() + "=Keyword",
		Revision.GetName() + "=Int",
		Trigger.GetName() + "=Keyword",
		Namespace.GetName() + "=Keyword",
	}
}
