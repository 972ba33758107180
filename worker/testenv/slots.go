package testenv

import (
	"os"
	"strconv"
	"sync"
	"time"
)

// Longest are the live tests that take the longest (CI run 84, on the
// 2-core machine, with the suite beside them): they start before the
// others of their package. Go releases a package's parallel tests all at
// once, when its sequential ones are done, in no set order: the soak
// started 267 s into make test's live phase, the placement outage test at
// 361 s, and both ended the phase alone, most of both cores idle.
var Longest = map[string]bool{
	"TestSoakThirtyLeasesWithCollidingNames":                                 true, // 293 s
	"TestFleetBenchmarkSlice":                                                true, // 272 s
	"TestHostileTenants":                                                     true, // 240 s
	"TestAPlacementWaitsForAClusterThatIsDown":                               true, // 214 s
	"TestWorkerVersioningPinsRolloutsAndShowsBothBuilds":                     true, // 161 s
	"TestLiveUpgradeInTheMiddleOfTwentyDeploys":                              true, // 157 s
	"TestWorkerRunsWithOnlyTheChartsRBAC":                                    true, // 152 s
	"TestTwentyDeploysSurviveOneOfThreeWorkersSIGKILLed":                     true, // 140 s
	"TestASecretIsInTheLeasesSecretsAndNowhereElse":                          true, // 128 s
	"TestAPlacementFromTheCLI":                                               true, // 115 s
	"TestAStatefulServiceDeploysRollsOutAndItsTeardownDeletesItsClaims":      true, // 112 s
	"TestTeardownAsTheDeployFinishesIsNeverLost":                             true, // 105 s
	"TestAFailedWaveAnalysisReturnsEarlierWavesAndNeverTouchesLaterOnes":     true, // 95 s
	"TestEachChangeIsTakenOnceWhileWorkersAreKilledAndAdded":                 true,
	"TestThreeWorkersSendEachObservationOnceAndTakeOverAKilledWorkersLeases": true, // 80 s
}

// slots runs a package's live tests side by side, DEPLOYFLOW_TEST_PARALLEL
// at a time (make test sets it, and go test's -parallel above it): the
// Longest first, then the others in the order they asked. Without it, go
// test's -parallel alone decides.
type slots struct {
	mu      sync.Mutex
	gather  time.Duration
	free    int
	open    bool // the first tests released have all asked (see take)
	opening *time.Timer
	waiting []*slotWaiter
}

type slotWaiter struct {
	long bool
	turn chan struct{}
}

// gather is how long the slots wait, from the first test's ask, before
// handing any out: Go releases a package's parallel tests together, and
// they all ask within it.
const gather = 300 * time.Millisecond

var testSlots = newSlots(os.Getenv("DEPLOYFLOW_TEST_PARALLEL"))

func newSlots(n string) *slots {
	size, err := strconv.Atoi(n)
	if err != nil || size < 1 {
		return nil
	}
	return &slots{free: size, gather: gather}
}

// take waits for the turn of the test named name; release gives its slot
// back.
func (s *slots) take(name string) (release func()) {
	if s == nil {
		return func() {}
	}
	w := &slotWaiter{long: Longest[name], turn: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	if !s.open && s.opening == nil {
		s.opening = time.AfterFunc(s.gather, s.openUp)
	}
	s.hand()
	s.mu.Unlock()
	<-w.turn
	return func() {
		s.mu.Lock()
		s.free++
		s.hand()
		s.mu.Unlock()
	}
}

// openUp hands out the first turns.
func (s *slots) openUp() {
	s.mu.Lock()
	s.open = true
	s.hand()
	s.mu.Unlock()
}

// hand gives the free slots to the waiting tests, the Longest first.
// s.mu is held.
func (s *slots) hand() {
	for s.open && s.free > 0 && len(s.waiting) > 0 {
		i := 0
		for j, w := range s.waiting {
			if w.long {
				i = j
				break
			}
		}
		w := s.waiting[i]
		s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
		s.free--
		close(w.turn)
	}
}
