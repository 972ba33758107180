package devstack_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/worker/testenv"
)

// A second `dev-up` reuses the running stack: nothing is started, every
// recorded PID stays the same and every component is ready.
func TestUpReusesARunningStack(t *testing.T) {
	env := testenv.Get(t)
	before := env.Stack.Status(context.Background())

	started, err := env.Stack.Up(context.Background())
	require.NoError(t, err)
	assert.False(t, started, "Up on a running stack must start nothing")

	after := env.Stack.Status(context.Background())
	require.Len(t, after, len(env.Stack.Processes()))
	for i, c := range after {
		assert.True(t, c.Running, "%s running", c.Name)
		assert.NoError(t, c.Ready, "%s ready", c.Name)
		assert.Equal(t, before[i].PID, c.PID, "%s kept its PID", c.Name)
	}
}
