package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// HTTPCheckInput is one measurement of an HTTP check analysis.
type HTTPCheckInput struct {
	// Namespace is the lease's: its Services may always be checked.
	Namespace string `json:"namespace"`
	URL       string `json:"url"`
	JSONField string `json:"jsonField,omitempty"`
}

// HTTPCheckAllowed reports whether an HTTP check of a lease in namespace
// may GET host: one of the lease's own Services (<svc>.<namespace>[.svc
// [.<cluster domain>]]), or a host the worker allows (exact names, *.suffix
// patterns, CIDRs). Anything else could let a lease owner make the worker
// probe addresses that are not theirs.
func HTTPCheckAllowed(host, namespace string, allow []string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if parts := strings.SplitN(host, ".", 3); len(parts) >= 2 && parts[1] == namespace &&
		(len(parts) == 2 || parts[2] == "svc" || strings.HasPrefix(parts[2], "svc.")) {
		return true
	}
	ip, ipErr := netip.ParseAddr(host)
	for _, a := range allow {
		a = strings.ToLower(a)
		switch {
		case strings.HasPrefix(a, "*."):
			if strings.HasSuffix(host, a[1:]) {
				return true
			}
		case strings.Contains(a, "/"):
			if p, err := netip.ParsePrefix(a); err == nil && ipErr == nil && p.Contains(ip) {
				return true
			}
		case a == host:
			return true
		}
	}
	return false
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
	if !HTTPCheckAllowed(req.URL.Hostname(), in.Namespace, a.HTTPCheckAllow) {
		return &Measurement{Message: fmt.Sprintf("not checked: %s is not one of the lease's Services (<service>.%s) nor allowed by the worker's --http-check-allow", req.URL.Hostname(), in.Namespace)}, nil
	}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if !HTTPCheckAllowed(r.URL.Hostname(), in.Namespace, a.HTTPCheckAllow) {
			return fmt.Errorf("redirected to %s, which is not allowed", r.URL.Hostname())
		}
		return nil
	}}
	resp, err := client.Do(req)
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
