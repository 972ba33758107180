package api

import (
	"time"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/internal/plan"
)

// Phases of a placement, of its waves and of its clusters.
const (
	PlacementDeploying  = "Deploying"
	PlacementSucceeded  = "Succeeded"
	PlacementFailed     = "Failed"  // a cluster or a gate failed; moved clusters returned
	PlacementAborted    = "Aborted" // an operator aborted; moved clusters returned
	PlacementRevertingP = "Reverting"

	WaveWaiting   = "Waiting"
	WaveDeploying = "Deploying"
	WaveGate      = "Gate"    // healthy; its pause or analysis runs
	WaveHeld      = "Held"    // awaiting approval, or its analysis was inconclusive: promote or abort
	WaveHealthy   = "Healthy" // healthy and its gate passed
	WaveFailed    = "Failed"
	WaveReverted  = "Reverted"

	ClusterWaiting   = "Waiting"
	ClusterDeploying = "Deploying"
	ClusterActive    = "Active"
	ClusterFailed    = "Failed"
	ClusterReverting = "Reverting"
	ClusterReverted  = "Reverted"
	// ClusterInterrupted: an abort, or another cluster's failure, stopped
	// the placement while this cluster's deploy was in flight; it is
	// returned like a cluster that moved.
	ClusterInterrupted = "Interrupted"
)

// PlacementInput starts a placement.
type PlacementInput struct {
	// Manifest is the lease's manifest, with its placement.
	Manifest manifest.Manifest `json:"manifest"`
	Trigger  string            `json:"trigger,omitempty"`

	invalid error // what is wrong with an input typed by hand (UnmarshalJSON)
}

// UnmarshalJSON decodes a PlacementInput strictly; the workflow refuses
// what is wrong, naming the fields.
func (in *PlacementInput) UnmarshalJSON(data []byte) error {
	type plain PlacementInput
	in.invalid = strictly(data, (*plain)(in), "manifest")
	return nil
}

// PlacementStatus is the "status" query's answer and the workflow's result:
// a tree of waves and their clusters.
type PlacementStatus struct {
	Lease string       `json:"lease"`
	Phase string       `json:"phase"`
	Error string       `json:"error,omitempty"`
	Waves []WaveStatus `json:"waves"`
	// Tree is PlacementTree, each operation's state as it goes: the plan
	// `deployflow deploy --plan` prints, as executed.
	Tree *plan.Node `json:"tree,omitempty"`
}

// PlacementTree is what a placement of m will do, as a tree
// (plan.Placement): each wave's deploys (in parallel), then its gate.
func PlacementTree(m *manifest.Manifest) *plan.Node {
	waves := make([]plan.Wave, 0, len(m.Placement.Waves))
	for _, w := range m.Placement.Waves {
		pw := plan.Wave{Clusters: w.Clusters, Pause: w.PauseDuration(), Approval: w.Approval}
		if w.Analysis != nil {
			pw.Analysis = w.Analysis.String()
		}
		waves = append(waves, pw)
	}
	return plan.Placement(m.Lease, waves)
}

// WaveStatus is one wave's state.
type WaveStatus struct {
	Phase    string          `json:"phase"`
	Gate     string          `json:"gate,omitempty"` // the gate, as it goes
	Clusters []ClusterStatus `json:"clusters"`
}

// ClusterStatus is one cluster's deploy in a placement.
type ClusterStatus struct {
	Cluster  string    `json:"cluster"`
	Phase    string    `json:"phase"`
	Revision int64     `json:"revision,omitempty"` // the lease's deploy in that cluster
	Outcome  string    `json:"outcome,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	// Reverted is the return to the last-known-good manifest, if any.
	Reverted string `json:"reverted,omitempty"`
}

// ClusterDeployInput is one deploy of the lease to one cluster (the
// DeployToCluster activity): sent as the "deploy" update of the lease's
// workflow of that cluster, with Key, so a retried activity finds its
// deploy instead of deploying twice.
type ClusterDeployInput struct {
	Cluster  string            `json:"cluster"`
	Manifest manifest.Manifest `json:"manifest"`
	Key      string            `json:"key"`
	// IfLast, if set, deploys only if the cluster's last deploy is the one
	// with this key (a placement's return: a cluster deployed again since
	// is left as it is).
	IfLast string `json:"ifLast,omitempty"`
}

// ClusterDeployResult is how it ended.
type ClusterDeployResult struct {
	Revision  int64  `json:"revision"`
	Outcome   string `json:"outcome"`
	Succeeded bool   `json:"succeeded"`
	// MovedOn: not deployed, the cluster was deployed again since IfLast.
	MovedOn bool `json:"movedOn,omitempty"`
}

// ClusterState is a cluster's lease workflow as a placement starts: its
// last-known-good manifest (what a failed placement returns it to).
type ClusterState struct {
	LastGood *manifest.Manifest `json:"lastGood,omitempty"`
}

// ClusterRef names a lease in a cluster.
type ClusterRef struct {
	Lease   string `json:"lease"`
	Cluster string `json:"cluster"`
}

// The placement activities' names (worker/app registers them: they reach
// Temporal, not a cluster).
const (
	ActivityListClusters    = "ListClusters"
	ActivityReadCluster     = "ReadCluster"
	ActivityDeployToCluster = "DeployToCluster"
	ActivityCheckPlacement  = "CheckPlacement"
)
