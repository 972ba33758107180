package flow

import (
	"encoding/json"
	"fmt"

	"github.com/deployflow/deployflow/api"
)

// DecodeCarry decodes a carry (none: *into stays nil). A carry is written
// by the workflow's own run; one that does not decode was typed by hand.
func DecodeCarry[T any](raw json.RawMessage, into **T) error {
	if !api.HasCarry(raw) {
		return nil
	}
	var c T
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("carry: is set by the workflow itself when it continues as new, and this one does not decode (%v): leave it out", err)
	}
	*into = &c
	return nil
}

// EncodeCarry returns in with carry encoded into it by set. A carry is
// plain data (no channels, no funcs): encoding it cannot fail.
func EncodeCarry[I, T any](in I, carry *T, set func(*I, json.RawMessage)) I {
	if carry != nil {
		b, err := json.Marshal(carry)
		if err != nil {
			panic(fmt.Sprintf("encoding a carry: %v", err))
		}
		set(&in, b)
	}
	return in
}
