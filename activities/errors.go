package activities

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
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

func invalidManifest(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidManifest, nil)
}
