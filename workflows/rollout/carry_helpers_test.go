package rollout

import (
	"encoding/json"

	"github.com/deployflow/deployflow/api"
)

// rawCarry is a carry as a continued run's input holds it (opaque bytes in
// the contract), for tests that start a run with one.
func rawCarry(c *rolloutCarry) json.RawMessage {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return b
}

// rolledOut decodes a rollout's input as the workflow does.
func rolledOut(in api.RolloutInput) rolloutInput {
	r, err := decodeRolloutInput(in)
	if err != nil {
		panic(err)
	}
	return r
}
