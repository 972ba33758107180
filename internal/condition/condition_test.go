package condition

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 20.1: a condition is data over result. These conditions compiled
// before (all of expr's builtins were on): now()/date() make a verdict
// differ on replay, and the repeat() one, judged in a workflow task, got
// the shared worker OOM-killed. Each is refused naming what is not allowed.
func TestConditionsRefuseWhatIsNotArithmeticOverResult(t *testing.T) {
	for _, tc := range []struct{ cond, want string }{
		{`len(repeat(repeat("a", 100000), 100000)) > 0`, "not allowed"},
		{`now().Unix() % 2 == 0`, "not allowed"},
		{`date("2026-01-01") < now()`, "not allowed"},
		{`result > 0 && now().Second() > 30`, "not allowed"},
		{`len(1..100000000) > 0`, `not allowed`},
		{`result in [1, 2, 3]`, "not allowed"},
		{`"a" matches "a+"`, "not allowed"},
		{`all(1..10, # > 0)`, "not allowed"},
		{`let x = result; x > 1`, "not allowed"},
		{`{"a": 1}.a > 0`, "not allowed"},
		{`result.Foo > 0`, "not allowed"},
		{`env > 0`, "not allowed"},
		{`sum(map(1..1000000, #)) > 0`, "not allowed"},
		{`fromJSON("[1]")[0] > 0`, "not allowed"},
		{`(result ?? 1) > 0`, "not allowed"},
		{`result | 1`, ""}, // any error
		{strings.Repeat("result + ", 40) + "1 > 0", "at most 256"},
		{`result + 1`, "not true or false"},
		{``, "empty"},
		{`result <`, "parse"},
	} {
		err := Check(tc.cond)
		if assert.Error(t, err, tc.cond) && tc.want != "" {
			assert.Contains(t, err.Error(), tc.want, tc.cond)
		}
	}
}

func TestConditionsJudgeArithmeticOverResult(t *testing.T) {
	for _, tc := range []struct {
		cond   string
		result float64
		want   bool
	}{
		{"result < 0.05", 0.01, true},
		{"result < 0.05", 0.5, false},
		{"result >= 0.95 and result <= 1", 0.97, true},
		{"abs(result - 100) < 5", 97, true},
		{"max(result, 1) == 1", 0.5, true},
		{"min(result, 10) > 9", 20, true},
		{"floor(result) == 3 || ceil(result) == 9", 3.7, true},
		{"round(result * 100) / 100 == 0.12", 0.1234, true},
		{"not (result > 1)", 2, false},
		{"result ** 2 > 8", 3, true},
		{"(result > 1 ? result : 1) >= 1", 0, true},
		{"result == 1", 1, true},
		{"true", 0, true},
	} {
		c, err := Compile(tc.cond)
		require.NoError(t, err, tc.cond)
		got, err := c.Holds(tc.result)
		require.NoError(t, err, tc.cond)
		assert.Equal(t, tc.want, got, "%s with result %v", tc.cond, tc.result)
	}
}
