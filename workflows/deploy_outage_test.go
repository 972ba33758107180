package workflows_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/manifest"
)

// TestDisruptiveAPIServerOutage stops the real kube-apiserver for 20s
// while two leases are idle: one checks itself every second (its safety
// net set that short), the other keeps the default hour and hears only
// from the worker's observer (issue 11.1), whose watches failing for 3s
// mean Unknown. Not being able to observe the cluster is Unknown for both:
// neither turns Degraded, nothing is torn down, and both are Active again
// once the API server is back.
//
// It stops a component other tests use, so `make test` runs it on its own
// after the rest (go test -run Disruptive -p 1).
func TestDisruptiveAPIServerOutage(t *testing.T) {
	dt := newDeployTest(t)
	host := dt.lease + ".apps.example.com"
	run := dt.deploy(twoServices(dt.lease, host, "nginx:1.26", nil, false))
	require.Equal(t, api.PhaseActive, dt.waitRevision(dt.lease, 1).Phase)
	quiet := newDeployTest(t)
	quiet.healthInterval = 0
	dt.env.Observer(t, 3*time.Second)
	quiet.deploy(twoServices(quiet.lease, quiet.lease+".apps.example.com", "nginx:1.26", nil, false))
	require.Equal(t, api.PhaseActive, quiet.waitRevision(quiet.lease, 1).Phase)

	var mu sync.Mutex
	seen, seenQuiet := map[string]int{}, map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			if st, err := dt.status(dt.lease); err == nil {
				mu.Lock()
				seen[st.Phase]++
				mu.Unlock()
			}
			if st, err := quiet.status(quiet.lease); err == nil {
				mu.Lock()
				seenQuiet[st.Phase]++
				mu.Unlock()
			}
		}
	}()

	require.NoError(t, dt.env.Stack.Stop(devstack.APIServer))
	restarted := false
	defer func() {
		if !restarted {
			_ = dt.env.Stack.Start(context.Background(), devstack.APIServer)
		}
	}()
	time.Sleep(20 * time.Second)
	mu.Lock()
	during, duringQuiet := map[string]int{}, map[string]int{}
	for k, v := range seen {
		during[k] = v
	}
	for k, v := range seenQuiet {
		duringQuiet[k] = v
	}
	mu.Unlock()
	require.NoError(t, dt.env.Stack.Start(context.Background(), devstack.APIServer))
	restarted = true
	// The stack as it was for the tests after this one: the PostgreSQL
	// phase, which followed at once, found the controller-manager's
	// informers still backing off (a namespace's default ServiceAccount
	// took more than 30s: CI).
	t.Cleanup(func() { dt.env.WaitForControllers(t, 3*time.Minute) })

	require.Eventually(t, func() bool {
		st, err := dt.status(dt.lease)
		return err == nil && st.Phase == api.PhaseActive
	}, 3*time.Minute, 250*time.Millisecond, "the lease never became Active again")
	require.Eventually(t, func() bool {
		st, err := quiet.status(quiet.lease)
		return err == nil && st.Phase == api.PhaseActive
	}, 3*time.Minute, 250*time.Millisecond, "the observed lease never became Active again")
	close(stop)
	wg.Wait()

	assert.Positive(t, during[api.PhaseUnknown], "the outage is reported as Unknown (seen %v)", during)
	assert.Positive(t, duringQuiet[api.PhaseUnknown], "the observer reports the outage as Unknown (seen %v)", duringQuiet)
	for _, bad := range []string{api.PhaseDegraded, api.PhaseTearingDown, api.PhaseTornDown, api.PhaseFailed} {
		assert.Zero(t, seen[bad], "phase %s during or after the outage (seen %v)", bad, seen)
		assert.Zero(t, seenQuiet[bad], "observed lease: phase %s during or after the outage (seen %v)", bad, seenQuiet)
	}
	assert.Zero(t, count(quiet.currentRun(quiet.lease), enumspb.EVENT_TYPE_TIMER_FIRED, nil), "the observed lease heard of the outage from the observer")
	_, err := dt.env.Kube.CoreV1().Namespaces().Get(context.Background(), manifest.Namespace(dt.lease), metav1.GetOptions{})
	require.NoError(t, err, "nothing was torn down")
	_, available, _ := dt.available(manifest.Namespace(dt.lease), "web")
	assert.Equal(t, int32(3), available)
	desc, err := dt.env.Temporal.DescribeWorkflowExecution(context.Background(), run.GetID(), "")
	require.NoError(t, err)
	assert.Nil(t, desc.GetWorkflowExecutionInfo().GetCloseTime(), "the lease's workflow carries on")
}
