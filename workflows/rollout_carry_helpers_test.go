package workflows

import (
	"github.com/deployflow/deployflow/api"
)

// rolledOut decodes a rollout's input as the workflow does.
func rolledOut(in api.RolloutInput) rolloutInput {
	r, err := decodeRolloutInput(in)
	if err != nil {
		panic(err)
	}
	return r
}
