package lease

import (
	"encoding/json"

	"github.com/deployflow/deployflow/api"
)

// Where a lease's continue-as-new payload is kept under Temporal's blob
// limit (issue 20.7). A run hands its successor one payload: the manifest
// deployed, the last-known-good, pending and last failed ones (each at
// most manifest.MaxSize, 256 KiB) and the last deploys' records with their
// executed trees, and the manifests of the last successful deploys (a
// rollback's targets, rollback.go). Temporal refuses a payload over 2 MiB (its default
// BlobSizeLimitError), and a continue-as-new it refuses leaves the lease's
// workflow failing its task in a loop; so the carry is kept under
// carryBudget by dropping what only `deployflow history` shows, oldest
// first: the records' trees, then the rollback targets, then the records
// themselves (the newest one stays).

// carryBudget is the most a continue-as-new payload may take: room for
// four manifests of manifest.MaxSize and the rest, well under the 2 MiB
// limit.
const carryBudget = 3 << 19 // 1.5 MiB

// fitCarry returns in with its carried history trimmed until the payload
// is within carryBudget. Encoding is deterministic (encoding/json sorts map
// keys), so a replay trims the same way.
func fitCarry(in deployInput) deployInput {
	if in.Carry == nil || size(in) <= carryBudget {
		return in
	}
	c := *in.Carry
	c.History = append([]api.DeployRecord(nil), c.History...)
	in.Carry = &c
	for i := 0; i < len(c.History)-1 && size(in) > carryBudget; i++ {
		c.History[i].Tree, c.History[i].Rollback, c.History[i].Operations = nil, nil, nil
	}
	// Then the deploys a rollback could return to, oldest first (only
	// manifests near the size limit lose them all).
	c.Deployed = append([]deployedManifest(nil), c.Deployed...)
	for len(c.Deployed) > 0 && size(in) > carryBudget {
		c.Deployed = c.Deployed[1:]
	}
	for len(c.History) > 1 && size(in) > carryBudget {
		c.History = c.History[1:]
	}
	return in
}

func size(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}
