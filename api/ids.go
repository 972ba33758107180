package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/deployflow/deployflow/internal/manifest"
)

// PlacementWorkflowID is the placement workflow of a lease: one at a time.
func PlacementWorkflowID(lease string) string { return "placement-" + lease }

// DeployWorkflowID is the one workflow of a lease (on the worker's own
// cluster).
func DeployWorkflowID(lease string) string { return "deploy-" + lease }

// DeployWorkflowIDIn is the workflow of a lease's deploys to cluster:
// deploy-<lease>@<cluster>, DeployWorkflowID for the default cluster "".
func DeployWorkflowIDIn(lease, cluster string) string {
	if cluster == "" {
		return DeployWorkflowID(lease)
	}
	return DeployWorkflowID(lease) + "@" + cluster
}

// LeaseOfWorkflowID is DeployWorkflowIDIn's inverse: the lease and cluster
// a lease workflow's ID names; ok is false for any other ID.
func LeaseOfWorkflowID(id string) (lease, cluster string, ok bool) {
	rest, ok := strings.CutPrefix(id, DeployWorkflowID(""))
	if !ok {
		return "", "", false
	}
	lease, cluster, _ = strings.Cut(rest, "@")
	return lease, cluster, true
}

// IDSeparator joins the parts of deployflow's workflow IDs. It cannot occur
// in a namespace, lease or service name (DNS labels: a-z, 0-9 and '-'), so
// no two (namespace, service) pairs share an ID.
const IDSeparator = ":"

// RolloutWorkflowID is the deterministic ID of a service's rollout, so one
// service never has two rollouts running side by side:
// rollout:<namespace>:<service>.
func RolloutWorkflowID(namespace, service string) string {
	return "rollout" + IDSeparator + namespace + IDSeparator + service
}

// ClusterRolloutWorkflowID is the rollout of a service of a lease's
// deploy to cluster (issue 23.1): rollout@<cluster>:<namespace>:<service>,
// so each cluster's rollout of the lease's namespace is its own workflow.
func ClusterRolloutWorkflowID(cluster, namespace, service string) string {
	if cluster == "" {
		return RolloutWorkflowID(namespace, service)
	}
	return "rollout@" + cluster + IDSeparator + namespace + IDSeparator + service
}

// ParseRolloutWorkflowID is RolloutWorkflowID's inverse.
func ParseRolloutWorkflowID(id string) (namespace, service string, ok bool) {
	parts := strings.Split(id, IDSeparator)
	if len(parts) != 3 || parts[0] != "rollout" || parts[1] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// LegacyRolloutWorkflowID is the ID rollouts had before IDSeparator: parts
// joined by '-', which two leases could share (lease a, service b-c and
// lease a-b, service c). Lease workflows started before the change keep
// using it for the rollouts they run (see versionRolloutID); the CLI falls
// back to it only after checking the rollout's own namespace and service.
func LegacyRolloutWorkflowID(namespace, service string) string {
	return "rollout-" + namespace + "-" + service
}

// PlanWorkflowID is the ID of the plan of manifest m:
// plan:<lease>:<hash of the manifest>. The same manifest gets the same ID, so
// two users planning it share one read-only run; different manifests never
// do.
func PlanWorkflowID(m manifest.Manifest) string {
	b, _ := json.Marshal(m.WithDefaults())
	sum := sha256.Sum256(b)
	return "plan" + IDSeparator + m.Lease + IDSeparator + hex.EncodeToString(sum[:8])
}

// The workflow types, as registered (worker/app) and as a start names them
// (`temporal workflow start --type`, client.ExecuteWorkflow).
const (
	DeployWorkflow          = "DeployWorkflow"
	RolloutWorkflow         = "RolloutWorkflow"
	PlacementWorkflow       = "PlacementWorkflow"
	PlanWorkflow            = "PlanWorkflow"
	ScheduledDeployWorkflow = "ScheduledDeployWorkflow"
	// StatefulSetRolloutWorkflow rolls a stateful service out through its
	// StatefulSet's partition (issue 39.2). It runs under the service's
	// rollout ID (RolloutWorkflowID): a service is one kind or the other.
	StatefulSetRolloutWorkflow = "StatefulSetRolloutWorkflow"
)
