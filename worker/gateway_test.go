package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Guards --routing gateway against a Gateway that is not there: before,
// the worker started and every deploy with a hostname waited for an
// acceptance that never came (RouteNotAccepted, retried). The worker
// binary now refuses to start, naming the flag and the fix, for a
// Gateway name, or a listener, the stack's cluster does not have.
func TestAWorkerRefusesToStartOnAGatewayThatIsNotThere(t *testing.T) {
	env := testenv.Get(t)
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--gateway", devstack.GatewayNamespace + "/nope"}, "--gateway " + devstack.GatewayNamespace + "/nope: no such Gateway"},
		{[]string{"--gateway", devstack.GatewayNamespace + "/" + devstack.GatewayName, "--gateway-listener", "https"},
			`--gateway-listener "https": Gateway ` + devstack.GatewayNamespace + "/" + devstack.GatewayName + ` has listeners ["` + devstack.GatewayListener + `"]`},
	} {
		w := startWorker(t, env, testenv.Name(t, "tq"), freeAddr(t), append([]string{"--routing", "gateway"}, tc.flags...)...)
		select {
		case err := <-w.exited:
			assert.Error(t, err, "the worker must not start")
		case <-time.After(60 * time.Second):
			t.Fatalf("the worker started with %v", tc.flags)
		}
		assert.Contains(t, strings.ReplaceAll(w.logs.String(), `\"`, `"`), tc.want, "(the log quotes the error)")
	}
}
