// Package analysis judges a canary's analysis gate (issue 12.3): each
// measurement against the manifest's successCondition / failureCondition,
// and the gate as a whole against its count and limits, as Argo Rollouts'
// AnalysisRuns judge theirs. Pure: the measuring is an activity's.
package analysis

import (
	"fmt"

	"github.com/expr-lang/expr"

	"github.com/deployflow/deployflow/internal/manifest"
)

// Phase is a measurement's or a gate's outcome.
type Phase string

const (
	Running      Phase = "Running"      // more measurements to take
	Successful   Phase = "Successful"   // the measurement passed; the gate passed
	Failed       Phase = "Failed"       // the measurement failed; too many did: abort
	Inconclusive Phase = "Inconclusive" // neither condition, or nothing to measure; too many: pause for a human
)

// Judge is one measurement's phase: with both conditions, failure wins,
// then success, else Inconclusive; with only a success condition, false
// fails; with only a failure condition, false succeeds. No value (the
// query returned no data, or could not be measured) is Inconclusive: what
// could not be observed is never a failure.
func Judge(a *manifest.Analysis, result *float64) (Phase, error) {
	if result == nil {
		return Inconclusive, nil
	}
	holds := func(cond string) (bool, error) {
		out, err := expr.Eval(cond, map[string]any{"result": *result})
		if err != nil {
			return false, fmt.Errorf("%q: %w", cond, err)
		}
		b, ok := out.(bool)
		if !ok {
			return false, fmt.Errorf("%q is %v, not true or false", cond, out)
		}
		return b, nil
	}
	var failed, succeeded bool
	var err error
	if a.FailureCondition != "" {
		if failed, err = holds(a.FailureCondition); err != nil {
			return "", err
		}
	}
	if a.SuccessCondition != "" {
		if succeeded, err = holds(a.SuccessCondition); err != nil {
			return "", err
		}
	}
	switch {
	case failed:
		return Failed, nil
	case a.SuccessCondition != "" && succeeded:
		return Successful, nil
	case a.SuccessCondition != "" && a.FailureCondition == "":
		return Failed, nil
	case a.SuccessCondition == "":
		return Successful, nil
	}
	return Inconclusive, nil
}

// Tally counts a gate's measurements by phase.
type Tally struct {
	Measured     int32 `json:"measured"`
	Successful   int32 `json:"successful"`
	Failed       int32 `json:"failed"`
	Inconclusive int32 `json:"inconclusive"`
}

// Add counts one measurement.
func (t *Tally) Add(p Phase) {
	t.Measured++
	switch p {
	case Successful:
		t.Successful++
	case Failed:
		t.Failed++
	case Inconclusive:
		t.Inconclusive++
	}
}

// Verdict is the gate's phase so far: Failed once failures exceed
// failureLimit, Inconclusive once inconclusive ones exceed
// inconclusiveLimit, Successful once count measurements are in, else
// Running.
func Verdict(a *manifest.Analysis, t Tally) Phase {
	switch {
	case t.Failed > a.FailureLimit:
		return Failed
	case t.Inconclusive > a.InconclusiveLimit:
		return Inconclusive
	case t.Measured >= a.Measurements():
		return Successful
	}
	return Running
}

// String is the tally as the status shows it.
func (t Tally) String() string {
	return fmt.Sprintf("%d measured: %d successful, %d failed, %d inconclusive", t.Measured, t.Successful, t.Failed, t.Inconclusive)
}
