package lease

import (
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Where a manifest enters a workflow, and the one place its defaults are
// filled (issue 36.3). A lease's workflow takes a manifest from its start
// and the deploy update (taken) and a continued run's from its carry
// (takeCarried); a plan from its request (PlanWorkflow). Each fills the
// defaults there, through withDefaults, and everything after holds and
// compares defaulted manifests: the chain, the operators' changes (scale,
// restart, reapply), health and the comparisons of one manifest with
// another never fill them again (TestDefaultsAreFilledWhereAManifestEnters).
// Before, 8 sites in the workflows filled them, and comparisons defaulted
// both sides.

// withDefaults is the one call that fills a manifest's defaults.
func withDefaults(m *manifest.Manifest) *manifest.Manifest { return m.WithDefaults() }

// taken is m as it enters the lease from its start or a deploy update:
// as the run takes it (accepted: hardened, or a placement's return to the
// last-known-good one as recorded), its defaults filled.
func (w *deployRun) taken(m *manifest.Manifest, returning bool) *manifest.Manifest {
	return w.accepted(withDefaults(m), returning)
}

// takeCarried fills the defaults of the manifests a continued run carries:
// a run of today carries them with their defaults (filling them again
// changes nothing), a run before it may not have.
func (w *deployRun) takeCarried() {
	carried := []**manifest.Manifest{&w.LastGood, &w.Pending, &w.LastFailed}
	deployed := make([]*manifest.Manifest, len(w.Deployed)) // a rollback's targets
	for i := range w.Deployed {
		deployed[i] = &w.Deployed[i].Manifest
		carried = append(carried, &deployed[i])
	}
	for _, m := range carried {
		if *m != nil {
			*m = withDefaults(*m)
		}
	}
	for i := range w.Deployed {
		w.Deployed[i].Manifest = *deployed[i]
	}
}

// returnsToLastGood reports whether req returns the lease to its
// last-known-good manifest (a placement's return, IfLast set). That
// manifest was accepted under the rules of its day, and is held to them:
// the update's validator takes it though a rule has tightened since
// (api.DeployRequest.PassesTheRulesOfItsDay).
func (w *deployRun) returnsToLastGood(req api.DeployRequest) bool {
	return req.IfLast != "" && w.LastGood != nil && sameManifest(withDefaults(&req.Manifest), w.LastGood)
}

// storageFollows refuses a deploy request whose manifest changes the
// storage of a service in a way its running StatefulSet cannot follow
// (manifest.StorageChange, issue 39), compared with what the lease runs:
// at the deploy update's door, as it enters, before it is accepted.
func (w *deployRun) storageFollows(req api.DeployRequest) error {
	return manifest.StorageChange(w.base(), withDefaults(&req.Manifest))
}
