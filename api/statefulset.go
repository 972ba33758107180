package api

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/deployflow/deployflow/internal/manifest"
)

// StatefulSetRolloutInput is StatefulSetRolloutWorkflow's input: a
// stateful service's StatefulSet as its lease's manifest renders it
// (manifest.StatefulSet), and how to roll it out. Its lease's workflow
// starts it as a child; a run started by hand is refused (the StatefulSet
// holds the tenant's volumes: only the lease that validated the manifest
// writes it).
type StatefulSetRolloutInput struct {
	Namespace   string             `json:"namespace"`
	Service     string             `json:"service"`
	StatefulSet appsv1.StatefulSet `json:"statefulSet"`
	// ProgressDeadlineSeconds: a step that makes no progress for this
	// long fails the rollout (ProgressDeadlineExceeded), after returning
	// to the previous revision with AutoRollback. 0: 600, as a
	// Deployment's default.
	ProgressDeadlineSeconds int32 `json:"progressDeadlineSeconds,omitempty"`
	// MaxUnavailable is how many ordinals a step releases at once (the
	// manifest's rollout maxUnavailable as a count); 0: 1.
	MaxUnavailable int32 `json:"maxUnavailable,omitempty"`
	AutoRollback   bool  `json:"autoRollback,omitempty"`
	// Steps make the rollout a canary: each setWeight a partition, each
	// pause a wait (manifest strategy Canary).
	Steps []manifest.CanaryStep `json:"steps,omitempty"`
	// Background is the canary's background analysis: measured while its
	// steps run; failed, the rollout aborts; inconclusive, it holds
	// before its next step for promote or abort.
	Background *manifest.Analysis `json:"background,omitempty"`
	// Revert: the rollout returns a lease to its last-known-good manifest
	// after a failed deploy. It takes no canary steps, and deletes the
	// pods of the failed revision that never turned Ready (the forced
	// rollback upstream leaves to the operator).
	Revert bool `json:"revert,omitempty"`
	// Carry is set by the workflow itself when it continues as new.
	Carry json.RawMessage `json:"carry,omitempty"`

	invalid error // what is wrong with an input typed by hand (UnmarshalJSON)
}
