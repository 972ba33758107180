package api

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/deployflow/deployflow/internal/manifest"
)

// RolloutStatus is the "status" query's answer: what `kubectl rollout
// status` and `kubectl get rs` would show, plus the engine's current step.
type RolloutStatus struct {
	Namespace         string                       `json:"namespace"`
	Service           string                       `json:"service"`
	Step              string                       `json:"step"`
	Message           string                       `json:"message,omitempty"`
	Paused            bool                         `json:"paused"`
	Strategy          string                       `json:"strategy"`
	Replicas          int32                        `json:"replicas"`
	UpdatedReplicas   int32                        `json:"updatedReplicas"`
	ReadyReplicas     int32                        `json:"readyReplicas"`
	AvailableReplicas int32                        `json:"availableReplicas"`
	DesiredReplicas   int32                        `json:"desiredReplicas"`
	Revision          int64                        `json:"revision"`
	StableRevision    int64                        `json:"stableRevision"`
	Outcome           string                       `json:"outcome,omitempty"`
	Conditions        []appsv1.DeploymentCondition `json:"conditions,omitempty"`
	ReplicaSets       []ReplicaSetStatus           `json:"replicaSets"`
	// Canary is a canary's step, weight and what it waits for.
	Canary *CanaryStatus `json:"canary,omitempty"`
	// BlueGreen is a blue-green's step and the versions its Services select.
	BlueGreen *BlueGreenStatus `json:"blueGreen,omitempty"`
	// StatefulSet is a stateful service's partition and revisions.
	StatefulSet *StatefulSetStatus `json:"statefulSet,omitempty"`
}

// StatefulSetStatus is the status query's view of a stateful rollout.
type StatefulSetStatus struct {
	// Partition is the StatefulSet's: the ordinals at or above it are
	// released to the update revision. Target is where the current step
	// takes it (0 at the end; a canary's weight stops short of it).
	Partition int32 `json:"partition"`
	Target    int32 `json:"target"`
	// UpdateRevision and CurrentRevision are the StatefulSet's
	// ControllerRevisions; StableRevision is the one an abort returns to.
	UpdateRevision  string `json:"updateRevision,omitempty"`
	CurrentRevision string `json:"currentRevision,omitempty"`
	StableRevision  string `json:"stableRevision,omitempty"`
	// Claims counts the StatefulSet's PersistentVolumeClaims.
	Claims int `json:"claims"`
}

// ReplicaSetStatus is one line of RolloutStatus.ReplicaSets.
type ReplicaSetStatus struct {
	Name      string `json:"name"`
	Revision  int64  `json:"revision"`
	New       bool   `json:"new"`
	Desired   int32  `json:"desired"`
	Current   int32  `json:"current"`
	Ready     int32  `json:"ready"`
	Available int32  `json:"available"`
	Image     string `json:"image,omitempty"`
}

// BlueGreenStatus is the status query's view of a blue-green.
type BlueGreenStatus struct {
	Step    int      `json:"step"` // 1-based; Steps+1 once done
	Steps   int      `json:"steps"`
	Summary string   `json:"summary"` // "step 2/5: await promotion (automatic in 12s)"
	List    []string `json:"list"`
	Active  string   `json:"active,omitempty"`  // the pod-template-hash the active Services select
	Preview string   `json:"preview,omitempty"` // and the preview
	Reason  string   `json:"reason,omitempty"`
}

// CanaryStatus is the status query's view of a canary.
type CanaryStatus struct {
	Step    int      `json:"step"` // 1-based; Steps+1 once the steps are done
	Steps   int      `json:"steps"`
	Weight  int32    `json:"weight"`
	Summary string   `json:"summary"` // "step 3/7: pause 4m12s left"
	List    []string `json:"list"`    // every step, as the manifest says it
	Reason  string   `json:"reason,omitempty"`
}

// RolloutInput is RolloutWorkflow's input, plain JSON so the workflow can be
// started from the Temporal UI, `temporal workflow start --input` or our CLI:
//
//	{"namespace": "shop", "service": "web",
//	 "deployment": {"spec": {"replicas": 3, "template": {...}}}}
//
// The Deployment describes the desired state only; it is never created in the
// cluster. Its name defaults to the service, its namespace to Namespace.
type RolloutInput struct {
	Namespace  string            `json:"namespace"`
	Service    string            `json:"service"`
	Deployment appsv1.Deployment `json:"deployment"`
	// AutoRollback restores the last-known-good revision when the progress
	// deadline passes (the workflow still fails, with ProgressDeadlineExceeded).
	AutoRollback bool `json:"autoRollback,omitempty"`
	// MaxHistoryEvents is the history length after which the rollout
	// continues as a new run (carrying its state); 0 means 4000. Long
	// rollouts stay cheap to replay; a small value exercises the hand-over.
	MaxHistoryEvents int `json:"maxHistoryEvents,omitempty"`
	// Steps make the rollout a canary (manifest strategy Canary): run them
	// before the ordinary syncs finish the rollout.
	Steps []manifest.CanaryStep `json:"steps,omitempty"`
	// Revert: the rollout returns a lease to its last-known-good manifest
	// after a failed deploy. It takes no canary steps, and a blue-green
	// switches without waiting for promotion, analyses or a scale-down
	// delay: getting back is urgent, and that version was good.
	Revert bool `json:"revert,omitempty"`
	// Background is a canary's background analysis, measured beside its
	// steps until they end.
	Background *manifest.Analysis `json:"background,omitempty"`
	// BlueGreen makes the rollout a blue-green (manifest strategy
	// BlueGreen): preview, promotion, switch, scale-down delay.
	BlueGreen *manifest.BlueGreen `json:"blueGreen,omitempty"`
	// TrafficRoutes are the HTTPRoutes (in Namespace) whose backend weights
	// the canary's setWeight steps set, between the service's stable and
	// canary Services (--routing gateway; at most MaxTrafficRoutes). None:
	// a weight is a share of the replicas only.
	TrafficRoutes []string `json:"trafficRoutes,omitempty"`
	// ScaleDownDelaySeconds is, with TrafficRoutes, how long the version
	// that lost its requests keeps its pods (manifest rollout's; 0: none).
	ScaleDownDelaySeconds int32 `json:"scaleDownDelaySeconds,omitempty"`
	// FewerEvents is set by the lease workflow (and the CLI) that starts the
	// rollout: it takes versionFewerEvents without recording a marker. A
	// rollout started without it asks the gate.
	FewerEvents bool `json:"fewerEvents,omitempty"`
	// MaxReplicas bounds the rollout's scale update: the operator's
	// --max-replicas less the lease's other services' replicas, set by the
	// lease workflow that starts the rollout (0: manifest.MaxReplicas).
	MaxReplicas int32 `json:"maxReplicas,omitempty"`
	// QuickWait is set by the lease workflow that starts the rollout: the
	// first wait for a change in each workflow task is a local activity of
	// a few seconds, so pods that become ready within it finish the
	// rollout in the task that applied it (six history events fewer than
	// an activity and the task after it). A rollout started without it
	// waits only in activities, as runs before it did; continued runs keep it.
	QuickWait bool `json:"quickWait,omitempty"`
	// Carry is set by the workflow itself when it continues as new (opaque
	// to all but it); leave it empty when starting a rollout.
	Carry json.RawMessage `json:"carry,omitempty"`

	invalid error // what is wrong with an input typed by hand (UnmarshalJSON)
}

// MaxTrafficRoutes bounds a rollout's TrafficRoutes (a service's HTTP
// ports, one route each).
const MaxTrafficRoutes = 16

// Outcomes of a finished rollout (RolloutResult.Outcome).
const (
	OutcomeComplete   = "Complete"   // the desired revision is fully available
	OutcomeAborted    = "Aborted"    // an operator aborted; the stable revision is back
	OutcomeRolledBack = "RolledBack" // the deadline passed; autoRollback restored the stable revision
)

// RolloutResult is what a finished rollout reports.
type RolloutResult struct {
	Namespace         string `json:"namespace"`
	Service           string `json:"service"`
	NewReplicaSet     string `json:"newReplicaSet"`
	Revision          int64  `json:"revision"`
	Replicas          int32  `json:"replicas"`
	AvailableReplicas int32  `json:"availableReplicas"`
	Outcome           string `json:"outcome"`
	// DesiredReplicas is the replicas the rollout ended with: an operator's
	// scale of the rollout changes it.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// RestartedAt is the pod template's restart annotation at the end (an
	// operator's restart of the rollout sets it).
	RestartedAt string `json:"restartedAt,omitempty"`
	// UndoneTo is the revision an operator's undo returned the rollout to:
	// it no longer runs the template it was started with.
	UndoneTo int64 `json:"undoneTo,omitempty"`
	// Canary and BlueGreen are how far a canary's or a blue-green's steps got.
	Canary    *StepsResult `json:"canary,omitempty"`
	BlueGreen *StepsResult `json:"blueGreen,omitempty"`
}

// StepsResult is how far a canary's (or a blue-green's) steps got: the
// first Completed steps ran; a promote --full at step PromotedFull
// (1-based) skipped the rest.
type StepsResult struct {
	Steps        int    `json:"steps"`
	Completed    int    `json:"completed"`
	PromotedFull int    `json:"promotedFull,omitempty"`
	Reason       string `json:"reason,omitempty"` // why it aborted
	// BackgroundFailed says why a canary's background analysis failed.
	BackgroundFailed string `json:"backgroundFailed,omitempty"`
}

// RestartedAtAnnotation is the pod-template annotation `kubectl rollout
// restart` sets; changing it rolls every pod.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// ScaleRequest is the "scale" update's argument.
type ScaleRequest struct {
	Replicas int32 `json:"replicas"`

	invalid error // a field unknown or of the wrong type (UnmarshalJSON)
}

// UndoRequest is the "undo" update's argument; ToRevision 0 means the
// previous revision (kubectl rollout undo).
type UndoRequest struct {
	ToRevision int64 `json:"toRevision"`

	invalid error // a field unknown or of the wrong type (UnmarshalJSON)
}

// PromoteRequest is the "promote" update's argument: Full skips the
// remaining steps (the ordinary syncs finish the rollout within its limits).
type PromoteRequest struct {
	Full bool `json:"full,omitempty"`

	invalid error // a field unknown or of the wrong type (UnmarshalJSON)
}
