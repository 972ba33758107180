package manifest

import (
	"fmt"
	"net/url"
	"time"

	"github.com/expr-lang/expr"

	"github.com/deployflow/deployflow/internal/condition"
	"github.com/deployflow/deployflow/internal/promscope"
)

// StrategyCanary moves a service to its new version in steps (issue 12.2):
// each setWeight puts that share of the replicas on the new version (a
// canary without a traffic router: Services select both versions), pauses
// wait for a time or for `deployflow promote`, and analyses gate the next
// step on a Prometheus query. A failed analysis aborts: the stable version
// is scaled back up first, then the canary down.
const StrategyCanary = "Canary"

// CanaryStep is one step of a canary: exactly one of its fields.
type CanaryStep struct {
	// SetWeight is the percentage (0 to 100) of replicas on the new version.
	SetWeight *int32 `json:"setWeight,omitempty"`
	// Pause waits: {duration: "5m"} for that long (or until promoted), {}
	// until promoted.
	Pause *Pause `json:"pause,omitempty"`
	// Analysis measures, and goes on only if the measurements pass.
	Analysis *Analysis `json:"analysis,omitempty"`
	// SetCanaryScale sets the canary's pods explicitly, apart from the
	// weights. Without a traffic router a weight is the share of replicas,
	// so this is the split by count: replicas N (or weight P% of the
	// replicas) on the canary, the rest on the stable version, until
	// matchTrafficWeight returns to the last setWeight's split.
	SetCanaryScale *CanaryScale `json:"setCanaryScale,omitempty"`
}

// CanaryScale is a setCanaryScale step: exactly one of its fields.
type CanaryScale struct {
	Replicas           *int32 `json:"replicas,omitempty"`
	Weight             *int32 `json:"weight,omitempty"`
	MatchTrafficWeight bool   `json:"matchTrafficWeight,omitempty"`
}

// Pause is a canary step that waits.
type Pause struct {
	// Duration is a Go duration ("30s", "5m"); empty waits for promote.
	Duration string `json:"duration,omitempty"`
}

// Analysis is a gate: Count measurements, Interval apart, each judged by
// SuccessCondition / FailureCondition over `result` (expr-lang syntax, as
// Argo Rollouts': "result < 0.05"). More than FailureLimit failed
// measurements abort the canary; more than InconclusiveLimit inconclusive
// ones (neither condition holds, or no data) pause it for a human
// (promote goes on, abort returns to stable).
type Analysis struct {
	// Prometheus is the query measured, against the worker's Prometheus
	// (--prometheus-url). Or:
	Prometheus *PrometheusQuery `json:"prometheus,omitempty"`
	// HTTP is a GET whose status code (or a JSON field of its answer) is
	// the result. Or:
	HTTP *HTTPCheck `json:"http,omitempty"`
	// Job is a Kubernetes Job (a smoke test) run in the lease's namespace:
	// the result is 1 if it succeeds, 0 if it fails; without a condition,
	// success passes.
	Job *JobCheck `json:"job,omitempty"`
	// SuccessCondition / FailureCondition: at least one.
	SuccessCondition string `json:"successCondition,omitempty"`
	FailureCondition string `json:"failureCondition,omitempty"`
	// Interval between measurements (default "10s"); Count measurements
	// (default 1).
	Interval          string `json:"interval,omitempty"`
	Count             int32  `json:"count,omitempty"`
	FailureLimit      int32  `json:"failureLimit,omitempty"`
	InconclusiveLimit int32  `json:"inconclusiveLimit,omitempty"`
}

// HTTPCheck is an analysis by HTTP GET (a smoke test, a health endpoint):
// the result is the answer's status code, or, with JSONField, the number
// (true is 1, false 0) at that dotted path of its JSON body.
type HTTPCheck struct {
	URL       string `json:"url"`
	JSONField string `json:"jsonField,omitempty"` // e.g. "checks.errorRate"
}

// JobCheck is an analysis by Kubernetes Job: one pod of Image running
// Command, which passes by exiting 0.
type JobCheck struct {
	Image   string   `json:"image"`
	Command []string `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// PodAnnotations are set on the Job's pod.
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// ActiveDeadlineSeconds bounds the Job (default 600): past it, it fails.
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
}

// DefaultJobDeadlineSeconds bounds an analysis Job when unset.
const DefaultJobDeadlineSeconds = 600

// Deadline is the Job's activeDeadlineSeconds, defaulted.
func (j *JobCheck) Deadline() int64 {
	if j.ActiveDeadlineSeconds == nil {
		return DefaultJobDeadlineSeconds
	}
	return *j.ActiveDeadlineSeconds
}

// JobPassed is a Job check's condition when it has none: it succeeded.
const JobPassed = "result == 1"

// PrometheusQuery is a PromQL query whose value is a scalar or a vector of
// one sample.
type PrometheusQuery struct {
	Query string `json:"query"`
}

// DefaultAnalysisInterval is an analysis's interval when unset.
const DefaultAnalysisInterval = 10 * time.Second

// IntervalDuration is the analysis's interval, defaulted.
func (a *Analysis) IntervalDuration() time.Duration {
	if d, err := time.ParseDuration(a.Interval); err == nil && d > 0 {
		return d
	}
	return DefaultAnalysisInterval
}

// Measurements is how many measurements the analysis takes.
func (a *Analysis) Measurements() int32 { return max(a.Count, 1) }

// String is the analysis as the plan and status show it.
func (a *Analysis) String() string {
	what := "analysis"
	switch {
	case a.HTTP != nil:
		what = "http check " + a.HTTP.URL
	case a.Job != nil:
		what = "job " + a.Job.Image
	}
	return fmt.Sprintf("%s (%d× every %s)", what, a.Measurements(), a.IntervalDuration())
}

// PauseDuration is the pause's duration; 0 waits for promote.
func (p *Pause) PauseDuration() time.Duration {
	d, _ := time.ParseDuration(p.Duration)
	return d
}

// CompileCondition checks a success or failure condition: an expression
// over `result` (a number) that yields true or false, in the bounded
// language of internal/condition (no program: issue 20.1).
func CompileCondition(cond string) error {
	return condition.Check(cond)
}

// legacyCompileCondition is CompileCondition before issue 20: any expr
// expression over result that yields a boolean (ValidateLenient), at most
// legacyConditionLength bytes.
func legacyCompileCondition(cond string) error {
	if len(cond) > legacyConditionLength {
		return fmt.Errorf("is %d bytes long: a condition is at most %d (a comparison over result, like \"result < 0.05\")", len(cond), condition.MaxLength)
	}
	_, err := expr.Compile(cond, expr.Env(map[string]any{"result": 0.0}), expr.AsBool())
	return err
}

// legacyConditionLength bounds a condition before expr's parser reads it
// in the lenient parse, which every input typed by hand goes through. The
// parser recurses once per nesting level, and a condition of some hundred
// thousand "(" or "!" overflowed the worker's stack: a fatal error, which
// no recover catches, and every worker that took the task again died too
// (found in issue 35's review). Conditions of before issue 20, which the
// lenient parse is for, were a comparison or two; today's are at most
// condition.MaxLength.
const legacyConditionLength = 16 * condition.MaxLength

func (v *validator) canarySteps(path string, steps []CanaryStep) {
	if len(steps) == 0 {
		v.add(path, "a Canary needs steps: for example [{setWeight: 20}, {pause: {duration: 1m}}, {setWeight: 50}, {pause: {}}]")
		return
	}
	for i, s := range steps {
		p := index(path, i)
		n := 0
		if s.SetWeight != nil {
			n++
			if w := *s.SetWeight; w < 0 || w > 100 {
				v.add(field(p, "setWeight"), "%d: want a percentage of replicas from 0 to 100", w)
			}
		}
		if s.Pause != nil {
			n++
			if d := s.Pause.Duration; d != "" {
				if parsed, err := time.ParseDuration(d); err != nil || parsed <= 0 {
					v.add(field(p, "pause.duration"), "%q: want a positive duration like 30s or 5m, or leave it out to wait for promote", d)
				}
			}
		}
		if s.Analysis != nil {
			n++
			v.analysis(field(p, "analysis"), s.Analysis)
		}
		if cs := s.SetCanaryScale; cs != nil {
			n++
			k := 0
			if cs.Replicas != nil {
				k++
				if *cs.Replicas < 0 {
					v.add(field(p, "setCanaryScale.replicas"), "%d is negative: give 0 or more canary pods", *cs.Replicas)
				}
			}
			if cs.Weight != nil {
				k++
				if *cs.Weight < 0 || *cs.Weight > 100 {
					v.add(field(p, "setCanaryScale.weight"), "%d: want a percentage of replicas from 0 to 100", *cs.Weight)
				}
			}
			if cs.MatchTrafficWeight {
				k++
			}
			if k != 1 {
				v.add(field(p, "setCanaryScale"), "give exactly one of replicas, weight or matchTrafficWeight: true (this one has %d)", k)
			}
		}
		if n != 1 {
			v.add(p, "a step is exactly one of setWeight, setCanaryScale, pause or analysis (this one has %d)", n)
		}
	}
}

func (v *validator) analysis(path string, a *Analysis) {
	providers := 0
	for _, set := range []bool{a.Prometheus != nil, a.HTTP != nil, a.Job != nil} {
		if set {
			providers++
		}
	}
	switch {
	case providers > 1:
		v.add(path, "measures one thing: give one of prometheus, http or job")
	case a.Job != nil:
		if msg := imageProblem(a.Job.Image); msg != "" {
			v.add(field(path, "job.image"), "%s", msg)
		}
		if d := a.Job.ActiveDeadlineSeconds; d != nil && *d <= 0 {
			v.add(field(path, "job.activeDeadlineSeconds"), "%d: give a positive number of seconds (default %d)", *d, DefaultJobDeadlineSeconds)
		}
	case a.HTTP != nil:
		if u, err := url.Parse(a.HTTP.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(field(path, "http.url"), "%q: want an http:// or https:// URL, e.g. http://web-preview/healthz", a.HTTP.URL)
		}
	case a.Prometheus == nil || a.Prometheus.Query == "":
		v.add(field(path, "prometheus.query"), "is required: the PromQL query to measure, e.g. sum(rate(http_requests_total{code=~\"5..\"}[1m])) / sum(rate(http_requests_total[1m])) (or give http: {url: ...})")
	default:
		// Only the lease's own series are read (issue 20.3): what cannot be
		// scoped to them is refused here.
		if err := promscope.Check(a.Prometheus.Query); err != nil && !v.lenient {
			v.add(field(path, "prometheus.query"), "%q: %s", truncate(a.Prometheus.Query, 80), err)
		}
	}
	if a.SuccessCondition == "" && a.FailureCondition == "" && a.Job == nil {
		v.add(path, "needs successCondition or failureCondition, e.g. successCondition: \"result < 0.05\"")
	}
	for _, c := range []struct{ name, cond string }{{"successCondition", a.SuccessCondition}, {"failureCondition", a.FailureCondition}} {
		if c.cond == "" {
			continue
		}
		compile := CompileCondition
		if v.lenient {
			compile = legacyCompileCondition
		}
		if err := compile(c.cond); err != nil {
			v.add(field(path, c.name), "%q: %s; write a comparison over result, like \"result < 0.05\"", truncate(c.cond, 80), firstLine(err.Error()))
		}
	}
	if a.Interval != "" {
		if d, err := time.ParseDuration(a.Interval); err != nil || d <= 0 {
			v.add(field(path, "interval"), "%q: want a positive duration like 10s", a.Interval)
		}
	}
	for _, n := range []struct {
		name string
		v    int32
	}{{"count", a.Count}, {"failureLimit", a.FailureLimit}, {"inconclusiveLimit", a.InconclusiveLimit}} {
		if n.v < 0 {
			v.add(field(path, n.name), "%d is negative: use 0 or more", n.v)
		}
	}
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// String is the step as the status and plan show it.
func (s CanaryStep) String() string {
	switch {
	case s.SetWeight != nil:
		return fmt.Sprintf("setWeight %d%%", *s.SetWeight)
	case s.SetCanaryScale != nil && s.SetCanaryScale.Replicas != nil:
		return fmt.Sprintf("setCanaryScale %d replicas", *s.SetCanaryScale.Replicas)
	case s.SetCanaryScale != nil && s.SetCanaryScale.Weight != nil:
		return fmt.Sprintf("setCanaryScale %d%%", *s.SetCanaryScale.Weight)
	case s.SetCanaryScale != nil:
		return "setCanaryScale matchTrafficWeight"
	case s.Pause != nil && s.Pause.Duration != "":
		return "pause " + s.Pause.Duration
	case s.Pause != nil:
		return "pause until promoted"
	case s.Analysis != nil:
		return s.Analysis.String()
	}
	return "?"
}

// truncate cuts s to n bytes for an error message, saying so.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
