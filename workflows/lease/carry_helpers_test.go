package lease

import (
	"encoding/json"

	"github.com/deployflow/deployflow/api"
)

// rawCarry is a carry as a continued run's input holds it (opaque bytes in
// the contract), for tests that start a run with one.
func rawCarry[T any](c *T) json.RawMessage {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return b
}

// deployed decodes a lease workflow's input as the workflow does.
func deployed(in api.DeployInput) deployInput {
	d, err := decodeDeployInput(in)
	if err != nil {
		panic(err)
	}
	return d
}
