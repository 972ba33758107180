package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/deployflow/deployflow/internal/manifest"
)

// Inputs typed by hand (the Temporal UI's JSON, `temporal workflow start
// --input`, `temporal workflow update execute --input`) are decoded
// strictly: an unknown field or a value of the wrong type is reported with
// its path, never dropped. encoding/json would ignore "replica": 3 and
// deploy one replica; the SDK would fail the workflow with a Go type name.
// The inputs' UnmarshalJSON never fails for such input: it keeps what is
// wrong, and the workflow (or the update's validator) refuses it with a
// typed failure naming each field.

// inputProblems checks data, a JSON object meant for a value of v's struct
// type, and returns a *manifest.ValidationError naming every unknown field
// and every value of the wrong type, or nil. The field manifestField, if
// any, is checked as a manifest by parse (manifest.Parse, today's rules:
// its problems come back under "<manifestField>.", with the field probably
// meant).
func inputProblems(data []byte, v any, manifestField string, parse func([]byte) (*manifest.Manifest, error)) error {
	t := reflect.TypeOf(v)
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			fields[name] = t.Field(i).Type
		}
	}
	names := slices.Sorted(maps.Keys(fields))
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return &manifest.ValidationError{Problems: []manifest.Problem{{
			Message: fmt.Sprintf("the input must be a JSON object with the fields %s, not %s", strings.Join(names, ", "), abbreviate(data))}}}
	}
	var ps []manifest.Problem
	rest := map[string]json.RawMessage{}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if _, ok := fields[k]; !ok {
			msg := "unknown field; the fields are " + strings.Join(names, ", ")
			if f := manifest.Nearest(k, names); f != "" {
				msg = fmt.Sprintf("unknown field; did you mean %s?", f)
			}
			ps = append(ps, manifest.Problem{Path: k, Message: msg})
			continue
		}
		if k == manifestField && !bytes.Equal(bytes.TrimSpace(top[k]), []byte("null")) {
			// Today's rules: an input typed by hand is never parsed with
			// the legacy rules (issue 35.1), which only a run's own
			// carried manifests take (decoded apart, validateManifest).
			_, err := parse(top[k])
			var verr *manifest.ValidationError
			switch {
			case errors.As(err, &verr):
				for _, p := range verr.Problems {
					ps = append(ps, manifest.Problem{Path: strings.TrimSuffix(k+"."+p.Path, "."), Message: p.Message})
				}
			case err != nil:
				ps = append(ps, manifest.Problem{Path: k, Message: err.Error()})
			}
			continue
		}
		rest[k] = top[k]
	}
	// The other fields: decoded strictly, unknown fields nested in them too.
	b, _ := json.Marshal(rest)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var typeErr *json.UnmarshalTypeError
	switch err := dec.Decode(reflect.New(t).Interface()); {
	case errors.As(err, &typeErr):
		ps = append(ps, manifest.Problem{Path: typeErr.Field, Message: fmt.Sprintf("want %s, got %s", typeErr.Type, typeErr.Value)})
	case err != nil:
		ps = append(ps, manifest.Problem{Message: strings.TrimPrefix(err.Error(), "json: ")})
	}
	if len(ps) == 0 {
		return nil
	}
	return &manifest.ValidationError{Problems: ps}
}

// InputErrorType is the failure type of an input's problems: InvalidManifest
// if all are in the manifest, else InvalidInput.
func InputErrorType(err error, manifestField string) string {
	var verr *manifest.ValidationError
	if manifestField == "" || !errors.As(err, &verr) {
		return ErrInvalidInput
	}
	for _, p := range verr.Problems {
		if p.Path != manifestField && !strings.HasPrefix(p.Path, manifestField+".") {
			return ErrInvalidInput
		}
	}
	return ErrInvalidManifest
}

// strictly decodes data, a hand-typed input, into *into (a plain struct
// type, without UnmarshalJSON) as encoding/json does, and returns what is
// wrong with it: the problems named by field (inputProblems), else
// encoding/json's error. An input over MaxInputSize is refused unparsed.
func strictly[P any](data []byte, into *P, manifestField string) error {
	if len(data) > MaxInputSize {
		return &manifest.ValidationError{Problems: []manifest.Problem{{
			Message: fmt.Sprintf("the input is %d bytes, more than the %d an input may have: a manifest is at most %d bytes (send a smaller one)", len(data), MaxInputSize, manifest.MaxSize)}}}
	}
	err := json.Unmarshal(data, into)
	var zero P
	if problems := inputProblems(data, zero, manifestField, manifest.Parse); problems != nil {
		return problems
	}
	return err
}

func abbreviate(data []byte) string {
	s := strings.TrimSpace(string(data))
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	if s == "" {
		return "nothing"
	}
	return s
}

// The operator updates' arguments, typed by hand in the UI or the CLI, are
// checked the same way, and their validators refuse what is wrong: before,
// {"service": "web", "replica": 6} scaled web to 0.

// MaxInputSize bounds an input typed by hand (a start, an update's or a
// signal's argument), checked before it is parsed: room for the largest
// manifest a continued run may still carry (1 MiB, the rules before issue
// 20; a manifest typed today is at most manifest.MaxSize) and the input's
// other fields. A constant, not a worker flag: the decision is replayed,
// and every worker must take it alike. (Temporal's own limit on a payload,
// 2 MB by default, is the server's.)
const MaxInputSize = 1<<20 + 64<<10

// UnmarshalJSON decodes a DeployInput; one typed by hand (no carry) is
// checked strictly, and what is wrong is kept for the workflow to refuse.
func (in *DeployInput) UnmarshalJSON(data []byte) error {
	type plain DeployInput
	if bytes.Contains(data, []byte(`"carry"`)) {
		if err := json.Unmarshal(data, (*plain)(in)); err != nil || HasCarry(in.Carry) {
			return err // written by a run of ours
		}
	}
	in.invalid = strictly(data, (*plain)(in), "manifest")
	return nil
}

// UnmarshalJSON decodes a DeployRequest (the deploy update's argument)
// strictly; the update's validator refuses what is wrong.
func (r *DeployRequest) UnmarshalJSON(data []byte) error {
	type plain DeployRequest
	r.invalid = strictly(data, (*plain)(r), "manifest")
	if r.invalid != nil && len(data) <= MaxInputSize {
		// Refused by today's rules only? A placement returning a lease to
		// its last-known-good manifest sends one accepted under the rules
		// of its day (PassesTheRulesOfItsDay).
		var zero plain
		r.ofItsDay = inputProblems(data, zero, "manifest", manifest.ParseLenient) == nil
	}
	return nil
}

// PassesTheRulesOfItsDay reports whether a request that today's rules
// refuse (Invalid) passes the rules a lease's carried manifests are held
// to (manifest.ParseLenient: the rules before issue 20's stricter ones).
// The lease's workflow takes such a request only when it returns the lease
// to its last-known-good manifest, which was accepted under those rules: a
// placement's return is never refused for a rule tightened since.
func (r *DeployRequest) PassesTheRulesOfItsDay() bool { return r.ofItsDay }

// UnmarshalJSON decodes a RolloutInput; one typed by hand (no carry) is
// checked strictly, and what is wrong is kept for the workflow to refuse.
func (in *RolloutInput) UnmarshalJSON(data []byte) error {
	type plain RolloutInput
	if bytes.Contains(data, []byte(`"carry"`)) {
		if err := json.Unmarshal(data, (*plain)(in)); err != nil || HasCarry(in.Carry) {
			return err // written by a run of ours
		}
	}
	in.invalid = strictly(data, (*plain)(in), "")
	return nil
}

func (in *StatefulSetRolloutInput) UnmarshalJSON(data []byte) error {
	type plain StatefulSetRolloutInput
	if bytes.Contains(data, []byte(`"carry"`)) {
		if err := json.Unmarshal(data, (*plain)(in)); err != nil || HasCarry(in.Carry) {
			return err // written by a run of ours
		}
	}
	in.invalid = strictly(data, (*plain)(in), "")
	return nil
}

func (r *ScaleServiceRequest) UnmarshalJSON(data []byte) error {
	type plain ScaleServiceRequest
	r.invalid = strictly(data, (*plain)(r), "")
	return nil
}

func (r *RollbackRequest) UnmarshalJSON(data []byte) error {
	type plain RollbackRequest
	r.invalid = strictly(data, (*plain)(r), "")
	return nil
}

func (r *RejectRequest) UnmarshalJSON(data []byte) error {
	type plain RejectRequest
	r.invalid = strictly(data, (*plain)(r), "")
	return nil
}

func (r *ApproveRequest) UnmarshalJSON(data []byte) error {
	type plain ApproveRequest
	r.invalid = strictly(data, (*plain)(r), "")
	return nil
}

func (r *ScaleRequest) UnmarshalJSON(data []byte) error {
	type plain ScaleRequest
	r.invalid = strictly(data, (*plain)(r), "")
	return nil
}

func (r *UndoRequest) UnmarshalJSON(data []byte) error {
	type plain UndoRequest
	r.invalid = strictly(data, (*plain)(r), "")
	return nil
}

func (r *PromoteRequest) UnmarshalJSON(data []byte) error {
	type plain PromoteRequest
	r.invalid = strictly(data, (*plain)(r), "")
	return nil
}

// MaxTriggerLength bounds a trigger ("cli", "ui", "schedule", ...).
const MaxTriggerLength = 64

// MaxKeyLength bounds a deploy request's key.
const MaxKeyLength = 160

var triggerRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._:/@+-]*$`)

// CheckTrigger reports what is wrong with a trigger, naming field.
func CheckTrigger(field, t string) error {
	switch {
	case t == "":
		return nil
	case len(t) > MaxTriggerLength:
		return fmt.Errorf("%s: %d bytes: a trigger names who asked (cli, ui, schedule) in at most %d", field, len(t), MaxTriggerLength)
	case !triggerRE.MatchString(t):
		return fmt.Errorf("%s: %q: use letters, digits and . _ : / @ + - (a word such as cli, ui or schedule)", field, t)
	}
	return nil
}

// CheckKey says what is wrong with a deploy request's key, typed by hand.
func CheckKey(field, k string) error {
	switch {
	case k == "":
		return nil
	case len(k) > MaxKeyLength:
		return fmt.Errorf("%s: %d bytes: a request's key is at most %d", field, len(k), MaxKeyLength)
	case !triggerRE.MatchString(k):
		return fmt.Errorf("%s: %q: use letters, digits and . _ : / @ + -", field, k)
	}
	return nil
}

// fingerprintRE is a plan's fingerprint as plan.Node.Fingerprint writes
// it and `deployflow deploy --plan` prints it.
var fingerprintRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// CheckPlanFingerprint refuses a plan fingerprint no plan has: typed by
// hand, it was carried as it came (issue 35.2: a huge one cost the lease
// failed workflow tasks). The value is not echoed.
func CheckPlanFingerprint(field, f string) error {
	if f == "" || fingerprintRE.MatchString(f) {
		return nil
	}
	return fmt.Errorf("%s: %d bytes that are no plan's fingerprint: give the 16 hex digits 'deployflow deploy --plan' prints, or leave it out", field, len(f))
}

// Invalid is what is wrong with an input typed by hand, found as it was
// decoded (nil if nothing is): the workflow or the update's validator
// refuses it, naming each field.
func (in *DeployInput) Invalid() error             { return in.invalid }
func (in *DeployRequest) Invalid() error           { return in.invalid }
func (in *RolloutInput) Invalid() error            { return in.invalid }
func (in *PlacementInput) Invalid() error          { return in.invalid }
func (in *StatefulSetRolloutInput) Invalid() error { return in.invalid }
func (in *ScaleServiceRequest) Invalid() error     { return in.invalid }
func (in *ApproveRequest) Invalid() error          { return in.invalid }
func (in *RollbackRequest) Invalid() error         { return in.invalid }
func (in *RejectRequest) Invalid() error           { return in.invalid }
func (in *ScaleRequest) Invalid() error            { return in.invalid }
func (in *UndoRequest) Invalid() error             { return in.invalid }
func (in *PromoteRequest) Invalid() error          { return in.invalid }

// HasCarry reports whether a carry was sent (a JSON null is none).
func HasCarry(c json.RawMessage) bool {
	return len(c) > 0 && !bytes.Equal(bytes.TrimSpace(c), []byte("null"))
}
