package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// HTTPCheckInput is one measurement of an HTTP check analysis.
type HTTPCheckInput struct {
	URL       string `json:"url"`
	JSONField string `json:"jsonField,omitempty"`
}

// maxCheckBody bounds what an HTTP check reads of an answer.
const maxCheckBody = 1 << 20

// MeasureHTTP GETs the check's URL: the result is the status code, or,
// with JSONField, the number at that dotted path of the JSON answer (true
// 1, false 0). An answer without that field, or not JSON, has no value
// (inconclusive); an unreachable URL is an error (retried, then
// inconclusive): what cannot be measured is never a failure.
func (a *Activities) MeasureHTTP(ctx context.Context, in HTTPCheckInput) (*Measurement, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.URL, nil)
	if err != nil {
		return &Measurement{Message: "bad URL: " + err.Error()}, nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", in.URL, err)
	}
	defer resp.Body.Close()
	if in.JSONField == "" {
		v := float64(resp.StatusCode)
		return &Measurement{Value: &v, Message: fmt.Sprintf("status %d", resp.StatusCode)}, nil
	}
	var body any
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxCheckBody)).Decode(&body); err != nil {
		return &Measurement{Message: fmt.Sprintf("status %d, not JSON: %v", resp.StatusCode, err)}, nil
	}
	for _, k := range strings.Split(in.JSONField, ".") {
		m, ok := body.(map[string]any)
		if !ok {
			return &Measurement{Message: fmt.Sprintf("status %d: no field %s in the answer", resp.StatusCode, in.JSONField)}, nil
		}
		if body, ok = m[k]; !ok {
			return &Measurement{Message: fmt.Sprintf("status %d: no field %s in the answer", resp.StatusCode, in.JSONField)}, nil
		}
	}
	var v float64
	switch x := body.(type) {
	case float64:
		v = x
	case bool:
		if x {
			v = 1
		}
	default:
		return &Measurement{Message: fmt.Sprintf("status %d: %s is %v, not a number or a boolean", resp.StatusCode, in.JSONField, body)}, nil
	}
	return &Measurement{Value: &v, Message: fmt.Sprintf("%s = %g", in.JSONField, v)}, nil
}
