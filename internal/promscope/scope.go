// Package promscope confines a tenant's PromQL query to its lease's series
// (issue 20.3), as prom-label-proxy does: the query is parsed with
// Prometheus' own parser, every selector gets the lease's label matcher
// (namespace="lease-<id>"), and a query that cannot be scoped, or that
// reaches too far back, is refused. Pure: the querying is an activity's.
package promscope

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// MaxLength is the longest query, in bytes.
const MaxLength = 2048

// MaxRange is the furthest back a query may look: a range selector, a
// subquery, or an offset.
const MaxRange = time.Hour

// A subquery evaluates its inner query once per step over its range, and
// one inside another multiplies: [1h:1ms] is 3.6 million evaluations, and
// nested, a shared Prometheus is pinned (issue 35.5). MinSubqueryStep is
// the finest step; MaxSubqueryPoints bounds the evaluations of a query's
// subqueries together (the product of range/step down each nesting), an
// hour at one a second. A subquery without a step takes Prometheus'
// evaluation interval, counted as defaultSubqueryStep (its default).
const (
	MinSubqueryStep     = time.Second
	MaxSubqueryPoints   = 3600
	defaultSubqueryStep = time.Minute
)

// DefaultLabel is the label that carries a series' Kubernetes namespace
// (what Prometheus' Kubernetes service discovery is usually relabelled to).
const DefaultLabel = "namespace"

var promql = parser.NewParser(parser.Options{}) // no experimental functions

// Check parses query and reports what keeps it from being scoped to one
// lease: a syntax error, a selector on the lease label (the worker sets
// it), an @ modifier, or a range, subquery or offset beyond MaxRange.
func Check(query string) error {
	_, err := Scope(query, DefaultLabel, "lease")
	return err
}

// Scope returns query with every selector confined to label=value.
func Scope(query, label, value string) (string, error) {
	if len(query) > MaxLength {
		return "", fmt.Errorf("is %d bytes long: a query is at most %d", len(query), MaxLength)
	}
	expr, err := promql.ParseExpr(query)
	if err != nil {
		return "", fmt.Errorf("does not parse: %s", firstLine(err.Error()))
	}
	var problem error
	refuse := func(format string, args ...any) {
		if problem == nil {
			problem = fmt.Errorf(format, args...)
		}
	}
	parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			if n.Timestamp != nil || n.StartOrEnd != 0 {
				refuse("the @ modifier is not allowed: a measurement is of now")
			}
			if n.OriginalOffset > MaxRange || n.OriginalOffset < -MaxRange {
				refuse("offset %s: at most %s", dur(n.OriginalOffset), dur(MaxRange))
			}
			for _, m := range n.LabelMatchers {
				if m.Name == label {
					refuse("selects by %s: the worker scopes every query to the lease's own %s, leave it out", label, label)
				}
			}
			// Ranges, subqueries and offsets on the way down add up.
			back := n.OriginalOffset
			for _, a := range path {
				switch a := a.(type) {
				case *parser.MatrixSelector:
					back += a.Range
				case *parser.SubqueryExpr:
					back += a.Range + a.OriginalOffset
				}
			}
			if back > MaxRange {
				refuse("looks back %s in all (ranges, subqueries and offsets add up): at most %s", dur(back), dur(MaxRange))
			}
			n.LabelMatchers = append(n.LabelMatchers, labels.MustNewMatcher(labels.MatchEqual, label, value))
		case *parser.MatrixSelector:
			if n.Range > MaxRange {
				refuse("range [%s]: at most %s", dur(n.Range), dur(MaxRange))
			}
		case *parser.SubqueryExpr:
			if n.Range > MaxRange {
				refuse("subquery range [%s]: at most %s", dur(n.Range), dur(MaxRange))
			}
			if n.Timestamp != nil || n.StartOrEnd != 0 {
				refuse("the @ modifier is not allowed: a measurement is of now")
			}
			if n.OriginalOffset > MaxRange || n.OriginalOffset < -MaxRange {
				refuse("offset %s: at most %s", dur(n.OriginalOffset), dur(MaxRange))
			}
			if n.Step != 0 && n.Step < MinSubqueryStep {
				refuse("subquery step [%s:%s]: at least %s", dur(n.Range), dur(n.Step), dur(MinSubqueryStep))
				break
			}
			if points := subqueryPoints(n, path); points > MaxSubqueryPoints {
				refuse("subqueries evaluate their query %d times in all (range/step, multiplied down each nesting): at most %d; use a coarser step or a shorter range", points, MaxSubqueryPoints)
			}
		}
		return nil
	})
	if problem != nil {
		return "", problem
	}
	out := expr.String()
	if _, err := promql.ParseExpr(out); err != nil {
		return "", errors.New("cannot be scoped to the lease's series")
	}
	return out, nil
}

// subqueryPoints is how many times subquery n, inside the subqueries on
// its path, evaluates its inner query: range/step for each, multiplied
// (saturating at MaxSubqueryPoints+1).
func subqueryPoints(n *parser.SubqueryExpr, path []parser.Node) int64 {
	points := int64(1)
	for _, s := range append(subqueries(path), n) {
		step := s.Step
		if step == 0 {
			step = defaultSubqueryStep
		}
		step = max(step, MinSubqueryStep) // a finer one is refused on its own
		points *= max(int64(s.Range/step), 1)
		if points > MaxSubqueryPoints {
			return MaxSubqueryPoints + 1
		}
	}
	return points
}

func subqueries(path []parser.Node) []*parser.SubqueryExpr {
	var out []*parser.SubqueryExpr
	for _, a := range path {
		if s, ok := a.(*parser.SubqueryExpr); ok {
			out = append(out, s)
		}
	}
	return out
}

func dur(d time.Duration) string { return model.Duration(d).String() }

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
