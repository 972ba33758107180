// Package analysis judges a canary's analysis gate (issue 12.3): each
// measurement against the manifest's successCondition / failureCondition,
// and the gate as a whole against its count and limits, as Argo Rollouts'
// AnalysisRuns judge theirs. Pure: the measuring is an activity's.
package analysis

import (
	"fmt"

	"github.com/expr-lang/expr"

	"github.com/deployflow/deployflow/internal/condition"
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

// Conditions are what a measurement is judged by: an analysis's
// successCondition and failureCondition (internal/condition's language).
// The activity that measures judges (issue 20.1): workflow code never runs
// a tenant's condition, and the verdict recorded is what replays.
type Conditions struct {
	SuccessCondition string `json:"successCondition,omitempty"`
	FailureCondition string `json:"failureCondition,omitempty"`
}

// ConditionsOf are a's conditions; a Job check without any passes when
// its Job succeeds.
func ConditionsOf(a *manifest.Analysis) Conditions {
	c := Conditions{SuccessCondition: a.SuccessCondition, FailureCondition: a.FailureCondition}
	if a.Job != nil && c.SuccessCondition == "" && c.FailureCondition == "" {
		c.SuccessCondition = manifest.JobPassed
	}
	return c
}

// Judge is one measurement's phase: with both conditions, failure wins,
// then success, else Inconclusive; with only a success condition, false
// fails; with only a failure condition, false succeeds. No value (the
// query returned no data, or could not be measured) is Inconclusive: what
// could not be observed is never a failure.
func Judge(a *manifest.Analysis, result *float64) (Phase, error) {
	return Conditions{SuccessCondition: a.SuccessCondition, FailureCondition: a.FailureCondition}.Judge(result)
}

// JudgeLegacy is Judge as runs before judge-where-measured judged, in
// their workflow code, with all of expr's language: they replay as they
// ran (new runs never call it: the activity judges, in internal/condition's
// language).
func (c Conditions) JudgeLegacy(result *float64) (Phase, error) {
	return c.judge(result, func(cond string) (bool, error) {
		out, err := expr.Eval(cond, map[string]any{"result": *result})
		if err != nil {
			return false, fmt.Errorf("%q: %w", cond, err)
		}
		b, ok := out.(bool)
		if !ok {
			return false, fmt.Errorf("%q is %v, not true or false", cond, out)
		}
		return b, nil
	})
}

// Judge is Judge of the conditions c.
func (c Conditions) Judge(result *float64) (Phase, error) {
	return c.judge(result, func(cond string) (bool, error) {
		p, err := condition.Compile(cond)
		if err != nil {
			return false, fmt.Errorf("%q: %w", cond, err)
		}
		return p.Holds(*result)
	})
}

func (c Conditions) judge(result *float64, holds func(string) (bool, error)) (Phase, error) {
	if result == nil {
		return Inconclusive, nil
	}
	var failed, succeeded bool
	var err error
	if c.FailureCondition != "" {
		if failed, err = holds(c.FailureCondition); err != nil {
			return "", err
		}
	}
	if c.SuccessCondition != "" {
		if succeeded, err = holds(c.SuccessCondition); err != nil {
			return "", err
		}
	}
	switch {
	case failed:
		return Failed, nil
	case c.SuccessCondition != "" && succeeded:
		return Successful, nil
	case c.SuccessCondition != "" && c.FailureCondition == "":
		return Failed, nil
	case c.SuccessCondition == "":
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
