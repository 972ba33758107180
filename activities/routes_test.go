package activities

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/deployflow/deployflow/internal/manifest"
)

// A route counts as programmed only when the operator's Gateway says
// Accepted and ResolvedRefs for the route's current generation: a status
// for an older generation, a refusal, another Gateway's status or none
// is not enough, and says why.
func TestARouteIsAcceptedOnlyByItsGatewayForItsGeneration(t *testing.T) {
	gw := manifest.GatewayRef{Namespace: "gw", Name: "public"}
	route := func(gen int64, parent string, conds ...map[string]any) *unstructured.Unstructured {
		var cs []any
		for _, c := range conds {
			cs = append(cs, c)
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "web-80", "generation": gen},
			"status": map[string]any{"parents": []any{map[string]any{
				"parentRef": map[string]any{"name": parent, "namespace": "gw"}, "controllerName": "x", "conditions": cs}}},
		}}
		return u
	}
	cond := func(typ, status string, gen int64) map[string]any {
		return map[string]any{"type": typ, "status": status, "observedGeneration": gen, "reason": "R", "message": "m", "lastTransitionTime": "2026-11-28T00:00:00Z"}
	}
	for _, c := range []struct {
		name string
		r    *unstructured.Unstructured
		ok   bool
		why  string
	}{
		{"accepted for its generation", route(2, "public", cond("Accepted", "True", 2), cond("ResolvedRefs", "True", 2)), true, ""},
		{"for the generation before", route(3, "public", cond("Accepted", "True", 2), cond("ResolvedRefs", "True", 2)), false, "Accepted for generation 2, not 3"},
		{"refused", route(2, "public", cond("Accepted", "False", 2), cond("ResolvedRefs", "True", 2)), false, "Accepted False: R m"},
		{"a backend unresolved", route(2, "public", cond("Accepted", "True", 2), cond("ResolvedRefs", "False", 2)), false, "ResolvedRefs False"},
		{"half reported", route(2, "public", cond("Accepted", "True", 2)), false, "ResolvedRefs not reported"},
		{"another Gateway's", route(2, "internal", cond("Accepted", "True", 2), cond("ResolvedRefs", "True", 2)), false, "no status from Gateway gw/public yet"},
		{"no status", &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "web-80"}}}, false, "no status from Gateway gw/public yet"},
	} {
		ok, why := RouteAccepted(c.r, gw)
		assert.Equal(t, c.ok, ok, c.name)
		assert.Contains(t, why, c.why, c.name)
	}
}
