package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 13.4: inputs typed by hand (the Temporal UI's JSON, `temporal
// workflow start --input`) are checked strictly. Before, encoding/json
// dropped unknown fields: {"replica": 3} deployed one replica, silently.
func TestHandTypedInputsNameWhatIsWrong(t *testing.T) {
	svc := func(extra string) string {
		return `{"manifest": {"lease": "shop", "services": [{"name": "web", "image": "nginx:1.27"` + extra + `}]}}`
	}
	for _, c := range []struct {
		name, input string
		want        []string // each in the error, in order
		typ         string
	}{
		{"valid", svc(`, "replicas": 3`), nil, ""},
		{"unknown field in the manifest", svc(`, "replica": 3`), []string{"manifest.services[0].replica: unknown field; did you mean replicas?"}, ErrInvalidManifest},
		{"wrong type in the manifest", svc(`, "replicas": "three"`), []string{`manifest.services[0].replicas: want a whole number, got the string "three"`}, ErrInvalidManifest},
		{"huge value", svc(`, "replicas": 1e12`), []string{"manifest.services[0].replicas: want a whole number, got the number 1e12"}, ErrInvalidManifest},
		{"unknown top-level field", `{"manifset": {"lease": "shop"}}`, []string{"manifset: unknown field; did you mean manifest?"}, ErrInvalidInput},
		{"wrong top-level type", `{"manifest": {"lease": "shop", "services": [{"name": "web", "image": "nginx"}]}, "degradedAfterSeconds": "30"}`,
			[]string{"degradedAfterSeconds: want int, got string"}, ErrInvalidInput},
		{"unknown top-level field, nothing near", `{"manifest": {"lease": "shop", "services": [{"name": "web", "image": "nginx"}]}, "zzz": 1}`,
			[]string{"zzz: unknown field; the fields are approvalTimeoutSeconds, carry"}, ErrInvalidInput},
		{"not an object", `["shop"]`, []string{"the input must be a JSON object with the fields"}, ErrInvalidInput},
		{"manifest not a mapping", `{"manifest": "shop"}`, []string{"manifest: the manifest must be a mapping"}, ErrInvalidManifest},
	} {
		t.Run(c.name, func(t *testing.T) {
			var in DeployInput
			require.NoError(t, json.Unmarshal([]byte(c.input), &in), "a hand-typed input never fails to decode: the workflow refuses it, typed")
			if c.want == nil {
				assert.NoError(t, in.Invalid())
				return
			}
			require.Error(t, in.Invalid())
			msg := in.Invalid().Error()
			for _, w := range c.want {
				assert.Contains(t, msg, w)
				msg = msg[strings.Index(msg, w)+len(w):]
			}
			assert.Equal(t, c.typ, InputErrorType(in.Invalid(), "manifest"))

			// The deploy update's argument is checked the same way.
			var req DeployRequest
			require.NoError(t, json.Unmarshal([]byte(c.input), &req))
			if !strings.Contains(c.name, "top-level") {
				assert.Error(t, req.Invalid())
			}
		})
	}
}

// A continued run's input (with its carry) is ours: decoded as it always was.
func TestACarriedInputIsNotRechecked(t *testing.T) {
	var in DeployInput
	require.NoError(t, json.Unmarshal([]byte(`{"manifest": {"lease": "shop"}, "carry": {"phase": "Active", "revision": 3, "retired": true}}`), &in))
	assert.NoError(t, in.Invalid())
	assert.JSONEq(t, `{"phase": "Active", "revision": 3, "retired": true}`, string(in.Carry), "the carry is kept as it came, for its workflow to decode")
}

// A carry of JSON null is no carry: the input is checked as typed by hand.
func TestANullCarryIsNoCarry(t *testing.T) {
	var in DeployInput
	require.NoError(t, json.Unmarshal([]byte(`{"manifest": {"lease": "shop"}, "carry": null, "zzz": 1}`), &in))
	require.Error(t, in.Invalid())
	assert.Contains(t, in.Invalid().Error(), "zzz: unknown field")
}

func TestHandTypedRolloutInputsNameWhatIsWrong(t *testing.T) {
	for input, want := range map[string]string{
		`{"namespace": "shop", "service": "web", "deployment": {"spec": {"replica": 3}}}`:     `unknown field "replica"`,
		`{"namespace": "shop", "service": "web", "deployment": {"spec": {"replicas": "3"}}}`:  "deployment.spec.replicas: want int32, got string",
		`{"namespace": "shop", "service": "web", "autoRollback": "yes"}`:                      "autoRollback: want bool, got string",
		`{"namespace": "shop", "servce": "web"}`:                                              "servce: unknown field; did you mean service?",
		`{"namespace": "shop", "service": "web", "deployment": {"spec": {"replicas": 1e12}}}`: "deployment.spec.replicas: want int32, got number 1e12",
	} {
		var in RolloutInput
		require.NoError(t, json.Unmarshal([]byte(input), &in))
		require.Error(t, in.Invalid(), input)
		assert.Contains(t, in.Invalid().Error(), want, input)
	}
	var ok RolloutInput
	require.NoError(t, json.Unmarshal([]byte(`{"namespace": "shop", "service": "web", "deployment": {"spec": {"replicas": 3}}}`), &ok))
	assert.NoError(t, ok.Invalid())
}

// The operator updates' arguments: before, {"service": "web", "replica": 6}
// decoded as replicas 0 and scaled web to nothing.
func TestHandTypedUpdateArgumentsNameWhatIsWrong(t *testing.T) {
	check := func(v interface{ Invalid() error }, input, want string) {
		t.Helper()
		require.NoError(t, json.Unmarshal([]byte(input), v))
		require.Error(t, v.Invalid(), input)
		assert.Contains(t, v.Invalid().Error(), want)
	}
	check(&ScaleServiceRequest{}, `{"service": "web", "replica": 6}`, "replica: unknown field; did you mean replicas?")
	check(&ScaleServiceRequest{}, `{"service": "web", "replicas": "6"}`, "replicas: want int32, got string")
	check(&RollbackRequest{}, `{"revision": 2}`, "revision: unknown field")
	check(&RejectRequest{}, `{"revision": "2"}`, "revision: want int64, got string")
	check(&ScaleRequest{}, `{"replica": 20}`, "replica: unknown field; did you mean replicas?")
	check(&UndoRequest{}, `{"to_revision": 1}`, "to_revision: unknown field")
	check(&PromoteRequest{}, `{"ful": true}`, "ful: unknown field; did you mean full?")
	check(&ApproveRequest{}, `{"fingerprnt": "abc"}`, "fingerprnt: unknown field; did you mean fingerprint?")

	var ok ScaleServiceRequest
	require.NoError(t, json.Unmarshal([]byte(`{"service": "web", "replicas": 6}`), &ok))
	assert.NoError(t, ok.Invalid())
	assert.Equal(t, int32(6), ok.Replicas)
}

// Issue 35.1: a condition of some hundred thousand "(" typed by hand
// into a deploy's input (a start, the deploy update, a placement) ended
// in "fatal error: stack overflow" in the workflow task that decoded it:
// the worker died, and every worker that took the task again. It is
// refused, naming the field, and the worker carries on.
func TestADeeplyNestedConditionTypedByHandIsRefusedNotAStackOverflow(t *testing.T) {
	for _, tc := range []struct{ cond, want string }{
		// A stack overflow, before; now past the manifest's size, refused
		// unparsed (a hand-typed manifest is parsed with today's rules
		// only, issue 35.1).
		{strings.Repeat("!", 900000) + "true", "manifest: the manifest is 900215 bytes, more than the 262144 allowed"},
		// Seconds of a CPU, before.
		{strings.Repeat("(", 300000) + "result < 1" + strings.Repeat(")", 300000), "manifest: the manifest is 600221 bytes, more than the 262144 allowed"},
		// Within the manifest's size: the condition's grammar refuses it.
		{strings.Repeat("!", 100000) + "true", "manifest.services[0].rollout.analysis.successCondition"},
		{strings.Repeat("(", 100000) + "result < 1" + strings.Repeat(")", 100000), "bytes long: a condition is at most 256"},
	} {
		input := `{"manifest": {"lease": "shop", "services": [{"name": "web", "image": "nginx:1.27", "rollout": {"strategy": "Canary",` +
			`"steps": [{"setWeight": 50}], "analysis": {"prometheus": {"query": "vector(1)"}, "successCondition": "` + tc.cond + `"}}}]}}`
		var in DeployInput
		require.NoError(t, json.Unmarshal([]byte(input), &in))
		require.Error(t, in.Invalid())
		assert.Contains(t, in.Invalid().Error(), tc.want)
		assert.Less(t, len(in.Invalid().Error()), 2000, "the refusal quotes a bounded part of the input")
		var req DeployRequest
		require.NoError(t, json.Unmarshal([]byte(input), &req))
		require.Error(t, req.Invalid())
	}
}

// Issue 35.1: an input typed by hand is bounded before it is parsed. Before,
// each was parsed whole (twice: decoded, then checked field by field), at
// whatever size the Temporal server let through (2 MB by default). Every
// input a person can type is refused over MaxInputSize, naming the bound and
// the manifest's, and nothing of it is decoded.
func TestAnOversizedInputTypedByHandIsRefusedBeforeItIsParsed(t *testing.T) {
	// Valid JSON, every field known: only its size is wrong.
	big := `{"manifest": {"lease": "shop", "services": [{"name": "web", "image": "nginx:1.27", "env": {"PAD": "` +
		strings.Repeat("x", MaxInputSize) + `"}}]}}`
	for _, v := range []interface{ Invalid() error }{&DeployInput{}, &DeployRequest{}, &PlacementInput{}} {
		require.NoError(t, json.Unmarshal([]byte(big), v))
		require.Error(t, v.Invalid(), "%T", v)
		assert.Contains(t, v.Invalid().Error(), "more than the 1114112 an input may have: a manifest is at most 262144 bytes", "%T", v)
	}
	var in DeployInput
	require.NoError(t, json.Unmarshal([]byte(big), &in))
	assert.Empty(t, in.Manifest.Services, "nothing of an oversized input is decoded")

	pad := `"` + strings.Repeat("x", MaxInputSize) + `"`
	for _, c := range []struct {
		v     interface{ Invalid() error }
		input string
	}{
		{&RolloutInput{}, `{"namespace": ` + pad + `}`},
		{&ScaleServiceRequest{}, `{"service": ` + pad + `}`},
		{&ScaleRequest{}, `{"replicas": ` + pad + `}`},
		{&UndoRequest{}, `{"toRevision": ` + pad + `}`},
		{&PromoteRequest{}, `{"full": ` + pad + `}`},
		{&ApproveRequest{}, `{"fingerprint": ` + pad + `}`},
		{&RollbackRequest{}, `{"to": ` + pad + `}`},
		{&RejectRequest{}, `{"revision": ` + pad + `}`},
	} {
		require.NoError(t, json.Unmarshal([]byte(c.input), c.v))
		require.Error(t, c.v.Invalid(), "%T", c.v)
		assert.Contains(t, c.v.Invalid().Error(), "an input may have", "%T", c.v)
	}

	// Just under the bound, the same input is parsed and checked as ever.
	var small DeployInput
	require.NoError(t, json.Unmarshal([]byte(`{"manifest": {"lease": "shop", "services": [{"name": "web", "image": "nginx:1.27"}]}}`), &small))
	assert.NoError(t, small.Invalid())
	assert.Len(t, small.Manifest.Services, 1)
}

// Issue 35: the manifest's size bound lived only in the CLI's parse. A
// 300 KB manifest typed by hand (here an env value of 300,000 bytes; every
// field valid) was taken by the lenient parse's 1 MiB, and the lease
// carried it, with its pending, last-known-good and last failed copies,
// past Temporal's 2 MiB payload limit when it continued as new. A start, a
// deploy update and a placement now refuse it by the manifest's own bound.
func TestA300KBManifestTypedByHandIsRefusedByTheManifestsSize(t *testing.T) {
	input := `{"manifest": {"lease": "shop", "services": [{"name": "web", "image": "nginx:1.27", "env": {"PAD": "` +
		strings.Repeat("x", 300000) + `"}}]}}`
	require.Less(t, len(input), MaxInputSize, "within the input's bound: only the manifest's refuses it")
	for _, v := range []interface{ Invalid() error }{&DeployInput{}, &DeployRequest{}, &PlacementInput{}} {
		require.NoError(t, json.Unmarshal([]byte(input), v))
		require.Error(t, v.Invalid(), "%T", v)
		assert.Contains(t, v.Invalid().Error(), "manifest: the manifest is 300", "%T", v)
		assert.Contains(t, v.Invalid().Error(), "more than the 262144 allowed", "%T", v)
	}
}

// A deploy request whose manifest only today's rules refuse (it passes the
// rules before issue 20's, as a lease's last-known-good manifest may) says
// so: the lease's workflow takes it as a return to that manifest. One with
// a problem the older rules refuse too does not.
func TestADeployRequestSaysWhetherOnlyTodaysRulesRefuseIt(t *testing.T) {
	older := `{"manifest": {"lease": "l", "services": [{"name": "web", "image": "nginx:1.27", "rollout": {"strategy": "Canary", "steps": [{"analysis": {"prometheus": {"query": "rate(x[1m])"}, "successCondition": "result in [200, 204]"}}]}}]}, "ifLast": "k"}`
	var req DeployRequest
	require.NoError(t, json.Unmarshal([]byte(older), &req))
	require.Error(t, req.Invalid(), "today's rules refuse its condition")
	assert.True(t, req.PassesTheRulesOfItsDay())

	for _, bad := range []string{
		`{"manifest": {"lease": "l", "services": [{"name": "web", "image": "nginx:1.27", "replica": 3}]}}`,
		`{"manifest": {"lease": "l", "services": [{"name": "web", "image": "nginx:1.27"}]}, "ifLst": "k"}`,
	} {
		var req DeployRequest
		require.NoError(t, json.Unmarshal([]byte(bad), &req))
		require.Error(t, req.Invalid(), bad)
		assert.False(t, req.PassesTheRulesOfItsDay(), bad)
	}
	var ok DeployRequest
	require.NoError(t, json.Unmarshal([]byte(`{"manifest": {"lease": "l", "services": [{"name": "web", "image": "nginx:1.27"}]}}`), &ok))
	assert.NoError(t, ok.Invalid())
}
