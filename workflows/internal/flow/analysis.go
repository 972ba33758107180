package flow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
)

// The one analysis runner (issue 36.5): a canary's analysis step, a
// blue-green's pre- and post-promotion analyses and a placement wave's
// analysis take their measurements through RunAnalysis, interval apart,
// until internal/analysis gives its verdict. They differ only in how they
// wait, what they measure with and where they show the last measurement
// (AnalysisRun). A canary's background analysis is not a gate: it runs
// beside the steps until they end (startBackground).

// AnalysisRun is how one analysis gate waits, measures and reports.
type AnalysisRun struct {
	// Stop, if set, is asked before each measurement: true hands the tally
	// on (a rollout's long history: its continued run goes on with it).
	Stop func() bool
	// Wait waits the interval between two measurements; stop: the gate
	// ends without a verdict (promoted past it, aborted, a long history).
	Wait func(d time.Duration) (stop bool, err error)
	// Measure takes one measurement, judged where it was taken.
	Measure func() (analysis.Phase, string)
	// Report shows the last measurement.
	Report func(msg string)
}

// RunAnalysis takes a's measurements into t until its verdict is in, and
// returns it: Running if the gate stopped first, "" with wait's error.
func RunAnalysis(a *manifest.Analysis, t *analysis.Tally, run AnalysisRun) (analysis.Phase, error) {
	for analysis.Verdict(a, *t) == analysis.Running {
		if run.Stop != nil && run.Stop() {
			return analysis.Running, nil
		}
		if t.Measured > 0 {
			stop, err := run.Wait(a.IntervalDuration())
			if err != nil {
				return "", err
			}
			if stop {
				return analysis.Running, nil
			}
		}
		phase, msg := run.Measure()
		run.Report(msg)
		t.Add(phase)
	}
	return analysis.Verdict(a, *t), nil
}

// AnalysisJobName is the name of a rollout run's n-th analysis Job:
// <service>-check-<hash of the run and n>, the same on every attempt.
func AnalysisJobName(svc, runID string, n int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", runID, n)))
	return svc + "-check-" + hex.EncodeToString(sum[:5])
}
