package statefulset

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rollout's history carries every read's pods: a thousand take about a
// kilobyte (issue 39: each read carried ~90 bytes a pod), and read back
// they are the pods written, a plain list written before still reads.
func TestPodsAreWrittenCompactlyAndReadBackTheSame(t *testing.T) {
	var ps Pods
	for ord := range int32(1000) {
		if ord == 500 {
			continue // not made yet
		}
		rev := "db-5d8f9c7b6"
		if ord >= 900 {
			rev = "db-6c4f8d9a1"
		}
		ps = append(ps, Pod{Ordinal: ord, Revision: rev, Ready: ord != 950, Available: ord < 950, Terminating: ord == 999})
	}
	b, err := json.Marshal(ps)
	require.NoError(t, err)
	assert.Less(t, len(b), 1100, "a thousand pods in about a kilobyte")
	var back Pods
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, ps, back)

	// More revisions than the compact form holds: a plain list.
	var many Pods
	for ord := range int32(10) {
		many = append(many, Pod{Ordinal: ord, Revision: fmt.Sprintf("db-%d", ord), Ready: true})
	}
	b, err = json.Marshal(many)
	require.NoError(t, err)
	assert.Equal(t, byte('['), b[0])
	back = nil
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, many, back)

	// As histories recorded before wrote them.
	back = nil
	require.NoError(t, json.Unmarshal([]byte(`[{"Ordinal":1,"Revision":"db-a","Ready":true,"Available":true,"Terminating":false}]`), &back))
	assert.Equal(t, Pods{{Ordinal: 1, Revision: "db-a", Ready: true, Available: true}}, back)
	var none Pods
	require.NoError(t, json.Unmarshal([]byte(`null`), &none))
	assert.Empty(t, none)
	assert.Error(t, json.Unmarshal([]byte(`{"revisions":["a"],"states":"J"}`), &none), "a state naming no revision")
}
