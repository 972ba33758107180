// Package wftest makes the SDK's test environment for the workflows' unit
// tests.
package wftest

import (
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
)

// Patience is how long, in real time, a unit test's workflow may go
// without yielding (the SDK's deadlock check, 1 s by default) and a mocked
// activity may take (its test timeout, 3 s by default). make test runs
// the unit tests beside the live ones, on a machine whose two cores are
// busy throughout and below the local stack's priority: a test whose
// goroutine did not get a CPU for a second failed as a "potential
// deadlock" (local CI run 98). A workflow that really blocks still fails,
// after Patience.
const Patience = time.Minute

// NewEnv is s.NewTestWorkflowEnvironment with Patience.
func NewEnv(s *testsuite.WorkflowTestSuite) *testsuite.TestWorkflowEnvironment {
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: Patience})
	env.SetTestTimeout(Patience)
	return env
}
