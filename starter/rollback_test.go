package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
)

// Issue 37.4, as docs/cli.md shows it: `deployflow rollback` returns a
// lease to the deploy before and `history` says so; `deployflow reject`
// makes a rollback to that deploy exit 1 naming it, and a Temporal
// Schedule's redeploy of a rejected deploy is refused, the refusal in
// `history`.
func TestRollbackAndRejectFromTheCLI(t *testing.T) {
	env, tq, lease := newLease(t, "back")
	dir := t.TempDir()
	write := func(name, image string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("lease: "+lease+"\nservices:\n  - name: web\n    image: "+image+"\n    replicas: 2\n"), 0o644))
		return p
	}
	waitFor := func(what string, cond func(api.DeployStatus) bool) api.DeployStatus {
		return waitLease(t, env, tq, lease, what, cond)
	}
	cli(t, env, tq, "lease", "create", lease, "--owner", "acme")
	cli(t, env, tq, "deploy", "-f", write("v1.yaml", "nginx:1.26"), "--wait")
	cli(t, env, tq, "deploy", "-f", write("v2.yaml", "nginx:1.27"), "--wait")

	out, _ := cli(t, env, tq, "rollback", lease)
	assert.Contains(t, out, "rolling lease "+lease+" back to the deploy before the one running")
	st := waitFor("rolled back", func(s api.DeployStatus) bool { return s.Revision == 3 && s.Phase == api.PhaseActive && !s.Pending })
	assert.Equal(t, "nginx:1.26", st.History[len(st.History)-1].Image["web"])
	out, _ = cli(t, env, tq, "history", lease)
	assert.Contains(t, out, "rollback to #1: Succeeded")
	assert.Contains(t, out, "roll back lease "+lease+" to deploy #1")

	out, _ = cli(t, env, tq, "reject", lease, "2")
	assert.Contains(t, out, "deploy #2 of lease "+lease+" rejected")
	code, _, stderr := runCLI("rollback", lease, "--to", "2", "--temporal-address", devstack.TemporalAddress)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "deploy #2 of lease "+lease+" was rejected (deployflow reject): a rollback does not deploy it again")
	out, _ = cli(t, env, tq, "history", lease)
	assert.Contains(t, out, "#2 (rejected)")

	// The version running rejected, then a Schedule's reapply: refused.
	cli(t, env, tq, "reject", lease, "3")
	id := ScheduleID(lease, api.RedeployReapply)
	cli(t, env, tq, "schedule", "create", lease, "--every", "24h", "--action", "reapply")
	t.Cleanup(func() { runCLI("schedule", "delete", id, "--temporal-address", devstack.TemporalAddress) })
	b, err := exec.Command(env.Stack.Bin(devstack.Temporal), "schedule", "trigger", "--address", devstack.TemporalAddress, "--schedule-id", id).CombinedOutput()
	require.NoError(t, err, "temporal schedule trigger: %s", b)
	st = waitFor("refused the schedule's redeploy", func(s api.DeployStatus) bool { return len(s.Refusals) > 0 })
	assert.Equal(t, int64(3), st.Revision, "nothing was deployed")
	out, _ = cli(t, env, tq, "history", lease)
	assert.Contains(t, out, "(schedule): deploy #3 of lease "+lease+" was rejected (deployflow reject): a reapply (schedule) does not deploy it again")
}
