package activities

import (
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/deployflow/deployflow/internal/manifest"
)

// Stable error types of non-retryable failures, for workflows and users to
// match on (temporal.ApplicationError.Type()).
const (
	// ErrInvalidInput: the request itself is wrong; retrying cannot help.
	ErrInvalidInput = "InvalidInput"
	// ErrReplicaSetConflict: a ReplicaSet with our deterministic name exists
	// but holds a different pod template (or is not ours).
	ErrReplicaSetConflict = "ReplicaSetConflict"
	// ErrInvalidManifest: the manifest cannot be deployed as written.
	ErrInvalidManifest = "InvalidManifest"
)

func invalidInput(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrInvalidInput, nil)
}

// requireDefaults refuses a manifest that reached step without its
// defaults: a deploy fills them once, where its chain starts
// (workflows/lease/chain.go, and PlanWorkflow for `deploy --plan`), and the
// steps after it never fill them again. A caller that skipped that is a bug
// in the caller, named here, not a tenant's error.
func requireDefaults(step string, m *manifest.Manifest) error {
	if m.HasDefaults() {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(
		step+": the manifest of lease "+m.Lease+" has no defaults: pass manifest.WithDefaults() of it (the deploy chain fills them once, where it starts)",
		ErrInvalidInput, nil)
}

func invalidManifest(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidManifest, nil)
}
