package api

import "github.com/deployflow/deployflow/internal/manifest"

// PlanRequest is PlanWorkflow's input: the manifest to plan.
type PlanRequest struct {
	Manifest manifest.Manifest `json:"manifest"`
}
