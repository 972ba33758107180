package analysis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/internal/manifest"
)

func TestJudge(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	both := &manifest.Analysis{SuccessCondition: "result < 0.05", FailureCondition: "result > 0.2"}
	success := &manifest.Analysis{SuccessCondition: "result < 0.05"}
	failure := &manifest.Analysis{FailureCondition: "result > 0.2"}
	cases := []struct {
		name   string
		a      *manifest.Analysis
		result *float64
		want   Phase
	}{
		{"both: success", both, f(0.01), Successful},
		{"both: failure", both, f(0.5), Failed},
		{"both: neither", both, f(0.1), Inconclusive},
		{"success only: false fails", success, f(0.1), Failed},
		{"success only: true", success, f(0.0), Successful},
		{"failure only: false succeeds", failure, f(0.1), Successful},
		{"failure only: true", failure, f(0.3), Failed},
		{"no data is inconclusive, never a failure", success, nil, Inconclusive},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Judge(c.a, c.result)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
	_, err := Judge(&manifest.Analysis{SuccessCondition: "result + 1"}, f(1))
	assert.ErrorContains(t, err, "not true or false")
}

func TestVerdict(t *testing.T) {
	a := &manifest.Analysis{Count: 3, FailureLimit: 1, InconclusiveLimit: 0}
	var tally Tally
	steps := []struct {
		measured Phase
		want     Phase
	}{
		{Successful, Running},
		{Failed, Running}, // one failure is within failureLimit 1
		{Successful, Successful},
	}
	for i, s := range steps {
		tally.Add(s.measured)
		assert.Equal(t, s.want, Verdict(a, tally), "after measurement %d", i+1)
	}
	assert.Equal(t, Failed, Verdict(a, Tally{Measured: 2, Failed: 2}))
	assert.Equal(t, Inconclusive, Verdict(a, Tally{Measured: 1, Inconclusive: 1}))
	assert.Equal(t, Successful, Verdict(&manifest.Analysis{}, Tally{Measured: 1, Successful: 1}), "count defaults to 1")
}
