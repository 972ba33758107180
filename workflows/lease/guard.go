package lease

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// Where a hand-typed input is kept from skipping validation (issue 20.7):
// state a workflow carries across continue-as-new is accepted only from
// the workflow itself, every carried manifest is validated again, and a
// trigger is a short printable word before it reaches a search attribute
// or the UI. Each check is behind versionGuardedInput, asked only when an
// input fails it, so runs that pass record no marker.

// guard is what is wrong with a DeployInput that the workflow itself would
// never have written; continued says the run continues an earlier one.
func (in deployInput) guard(continued bool) error {
	var errs []error
	if err := api.CheckTrigger("trigger", in.Trigger); err != nil {
		errs = append(errs, err)
	}
	if err := api.CheckKey("key", in.Key); err != nil {
		errs = append(errs, err)
	}
	c := in.Carry
	if c == nil {
		return errors.Join(errs...)
	}
	if !continued {
		errs = append(errs, errors.New("carry: is set by the workflow itself when it continues as new; leave it out when starting a lease's workflow"))
	}
	for _, m := range []struct {
		field string
		m     *manifest.Manifest
	}{{"carry.lastGood", c.LastGood}, {"carry.pending", c.Pending}, {"carry.lastFailed", c.LastFailed}} {
		if m.m == nil {
			continue
		}
		if err := m.m.ValidateLenient(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.field, err))
		}
	}
	for i := range c.Deployed {
		if err := c.Deployed[i].Manifest.ValidateLenient(); err != nil {
			errs = append(errs, fmt.Errorf("carry.deployed[%d].manifest: %w", i, err))
		}
	}
	if err := api.CheckTrigger("carry.pendingTrigger", c.PendingTrigger); err != nil {
		errs = append(errs, err)
	}
	if err := api.CheckKey("carry.pendingKey", c.PendingKey); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateManifest validates a workflow's starting manifest: by today's
// rules for a fresh start, by the rules of its day for one a continued run
// carries (it was accepted then, and is contained at measurement: a
// condition or query today's rules refuse is not judged, not run). A
// fresh start is validated by today's rules only: a hand-typed manifest is
// never parsed with the legacy ones (issue 35.1).
func validateManifest(m *manifest.Manifest, carried bool) error {
	if carried {
		return m.ValidateLenient()
	}
	return m.Validate()
}

// checkLeaseWorkflowID refuses a lease workflow started under another ID
// than its lease's (issue 35.2): under any other ID it acted for that lease
// beside the lease's own workflow, deploying over it, and, failing early,
// released hostnames and IPs the lease's Ingress and Services still used.
// Temporal keeps one workflow per ID open, so under its own ID a lease has
// one workflow at a time. The SDK's replayer runs a recorded history under
// an ID of its own: let through while replaying. Asked only when the ID is
// another (versionOwnWorkflowID), so runs that pass record no marker.
func checkLeaseWorkflowID(ctx workflow.Context, in deployInput) error {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	want := api.DeployWorkflowIDIn(in.Manifest.Lease, in.Cluster)
	if id == want || (id == flow.ReplayerWorkflowID && workflow.IsReplaying(ctx)) {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"workflow ID: lease %s's deploys run as workflow %s, not %s: start it under that ID (deployflow deploy does), or send the deploy update to it",
		in.Manifest.Lease, want, id), api.ErrInvalidInput, nil)
}

// maxInputDuration bounds a duration typed into a lease's workflow input in
// seconds (healthIntervalSeconds, degradedAfterSeconds,
// approvalTimeoutSeconds).
const maxInputDuration = 7 * 24 * time.Hour

// inputSeconds is n seconds, saturating: 0 for n <= 0 (the default), at
// most maxInputDuration (issue 35.2). Multiplied as it was,
// "healthIntervalSeconds": 18446744074 wrapped round to 0.29s: an idle
// lease checking itself three times a second, forever.
func inputSeconds(n int) time.Duration {
	switch {
	case n <= 0:
		return 0
	case int64(n) > int64(maxInputDuration/time.Second):
		return maxInputDuration
	}
	return time.Duration(n) * time.Second
}
