package promscope

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 20.3: a tenant's query sees only its lease's series. Before, a
// query was sent as written, so `sum(rate(http_requests_total[1m]))` read
// every tenant's traffic and the value was printed back.
func TestScopeConfinesEverySelectorToTheLease(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{`up`, `up{namespace="lease-a"}`},
		{`sum(rate(http_requests_total{code=~"5.."}[1m])) / sum(rate(http_requests_total[1m]))`,
			`sum(rate(http_requests_total{code=~"5..",namespace="lease-a"}[1m])) / sum(rate(http_requests_total{namespace="lease-a"}[1m]))`},
		{`{__name__=~".+"}`, `{__name__=~".+",namespace="lease-a"}`},
		{`max_over_time(up[5m:30s])`, `max_over_time(up{namespace="lease-a"}[5m:30s])`},
		{`up or on() vector(1)`, `up{namespace="lease-a"} or on () vector(1)`},
		{`label_replace(up, "namespace", "lease-b", "", "")`, `label_replace(up{namespace="lease-a"}, "namespace", "lease-b", "", "")`},
		{`1`, `1`},
		// Within the subquery bounds: an hour at one a second; nested, 60 x 59.
		{`max_over_time(up[1h:1s])`, `max_over_time(up{namespace="lease-a"}[1h:1s])`},
		{`max_over_time(rate(up[1m])[30m:])`, `max_over_time(rate(up{namespace="lease-a"}[1m])[30m:])`},
		{`max_over_time(max_over_time(up[1m:1s])[59m:1m])`, `max_over_time(max_over_time(up{namespace="lease-a"}[1m:1s])[59m:1m])`},
	} {
		got, err := Scope(tc.query, "namespace", "lease-a")
		require.NoError(t, err, tc.query)
		assert.Equal(t, tc.want, got, tc.query)
	}
}

func TestQueriesThatCannotBeScopedAreRefused(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{`up{namespace="lease-b"}`, "selects by namespace"},
		{`up{namespace!="lease-a"}`, "selects by namespace"},
		{`rate(x[30d])`, "range [30d]: at most 1h"},
		{`max_over_time(up[2h:1m])`, "subquery range [2h]"},
		{`up offset 1w`, "offset 1w"},
		{`up @ 1609746000`, "the @ modifier"},
		{`up @ start()`, "the @ modifier"},
		{`info(up)`, "does not parse"},
		{`max_over_time(max_over_time(rate(x[1h] offset 1h)[1h:1m] offset 1h)[1h:1m] offset 1h)`, "looks back 6h in all"},
		{`max_over_time(rate(x[40m])[30m:1m])`, "looks back 1h10m in all"},
		{`sum(`, "does not parse"},
		{strings.Repeat("up+", 700) + "up", "at most 2048"},
		// Issue 35.5: a subquery's evaluations are bounded, with or
		// without a selector (vector(1) has none). Before, [1h:1ms] was
		// 3.6 million evaluations, and nested ones multiplied.
		{`max_over_time(up[1h:1ms])`, "subquery step [1h:1ms]: at least 1s"},
		{`sum_over_time(vector(1)[1h:1ms])`, "subquery step"},
		{`max_over_time(up[1h:500ms])`, "subquery step"},
		{`max_over_time(max_over_time(up[10m:1s])[30m:1s])`, "subqueries evaluate their query 3601 times in all"},
		{`max_over_time(max_over_time(vector(1)[10m:1s])[30m:1s])`, "at most 3600"},
		{`max_over_time(max_over_time(max_over_time(up[5m:10s])[5m:10s])[5m:10s])`, "at most 3600"},
	} {
		_, err := Scope(tc.query, "namespace", "lease-a")
		if assert.Error(t, err, tc.query) {
			assert.Contains(t, err.Error(), tc.want, tc.query)
		}
	}
}
