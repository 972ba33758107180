package manifest

// A rollout started by hand (the Temporal UI, `temporal workflow start`)
// carries a canary's steps, its background analysis or a blue-green's
// analyses without a manifest around them (issue 35: they were never
// validated). These check them as a manifest's would be, under the paths
// of the rollout's input.

// ValidateRolloutAnalyses validates a rollout input's canary steps,
// background analysis and blue-green section by the manifest's rules
// (lenient: the rules before issue 20, for a run continuing one that took
// them), naming each field under steps, background and blueGreen.
func ValidateRolloutAnalyses(steps []CanaryStep, background *Analysis, blueGreen *BlueGreen, replicas int32, lenient bool) error {
	v := validator{lenient: lenient}
	if len(steps) > 0 {
		v.canarySteps("steps", steps)
	}
	if background != nil {
		v.analysis("background", background)
	}
	v.blueGreen("blueGreen", blueGreen, max(replicas, 1))
	if !lenient {
		// No lease's plan held them to the operator's limits: the
		// defaults hold (an interval of 1ms, a million measurements).
		l := DefaultLimits()
		if len(steps) > l.CanarySteps {
			v.add("steps", "%d steps: at most %d per canary", len(steps), l.CanarySteps)
		}
		for i, s := range steps {
			if s.Analysis != nil {
				analysisLimits(&v.problems, field(index("steps", i), "analysis"), s.Analysis, l)
			}
		}
		if background != nil {
			analysisLimits(&v.problems, "background", background, l)
		}
		if blueGreen != nil {
			for _, a := range []struct {
				path string
				a    *Analysis
			}{{"blueGreen.prePromotionAnalysis", blueGreen.PrePromotionAnalysis}, {"blueGreen.postPromotionAnalysis", blueGreen.PostPromotionAnalysis}} {
				if a.a != nil {
					analysisLimits(&v.problems, a.path, a.a, l)
				}
			}
		}
	}
	return v.err()
}

// CheckAnalysisJob checks an analysis Job against the operator's limits
// and pod key policy where it is written (path names it in the error):
// its activeDeadlineSeconds within --max-job-seconds, its pod annotations
// the tenant's own or allowed (see CheckReservedKeys). A lease's plan
// checks the same before anything is written; this holds for a Job of
// any rollout, one started by hand included.
func CheckAnalysisJob(path string, j *JobCheck, l Limits, prefixes, allowed []string) error {
	if j == nil {
		return nil
	}
	l = l.OrDefaults()
	var v problems
	if j.Deadline() > l.MaxJobSeconds {
		v.add(field(path, "activeDeadlineSeconds"), "%d: this provider runs an analysis Job for at most %d seconds (the operator's --max-job-seconds)", j.Deadline(), l.MaxJobSeconds)
	}
	newKeyPolicy(prefixes, allowed).check(&v, field(path, "podAnnotations"), j.PodAnnotations)
	return v.err()
}
