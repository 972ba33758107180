package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Notification is what the webhook receives (a JSON POST) when a canary
// completes a step, pauses, is promoted, aborts or fails (issue 12.5). The
// rollout's Temporal history stays the audit log; this is for people.
type Notification struct {
	Time      time.Time `json:"time"`
	Event     string    `json:"event"` // StepCompleted, Paused, Promoted, Aborted, Failed
	Namespace string    `json:"namespace"`
	Service   string    `json:"service"`
	Step      int       `json:"step,omitempty"` // 1-based
	Steps     int       `json:"steps,omitempty"`
	Weight    int32     `json:"weight"`
	Message   string    `json:"message"`
}

// Notifier posts notifications to a webhook (--notify-url).
type Notifier struct {
	URL    string
	Client *http.Client
}

// Notify posts n to the worker's webhook; without one it does nothing. A
// non-2xx answer or no answer is an error, retried by the activity's
// policy.
func (a *Activities) Notify(ctx context.Context, n Notification) error {
	if a.Notifier == nil || a.Notifier.URL == "" {
		return nil
	}
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Notifier.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	c := a.Notifier.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("notify %s: %w", a.Notifier.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("notify %s: %s %s", a.Notifier.URL, resp.Status, bytes.TrimSpace(b))
	}
	return nil
}
