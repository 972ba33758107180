package testenv

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The live tests' slots hand out their turns the Longest first, once the
// tests released together have all asked: without it, the two longest
// tests of the workflows package started 267 s and 361 s into make test's
// live phase and ended it alone (CI run 84).
func TestTheLongestTestsTakeTheirTurnFirst(t *testing.T) {
	s := newSlots("2")
	s.gather = time.Hour // opened below, once all have asked
	names := []string{"TestA", "TestB", "TestSoakThirtyLeasesWithCollidingNames", "TestC", "TestHostileTenants"}
	var mu sync.Mutex
	var order []string
	var releases []func()
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release := s.take(name)
			mu.Lock()
			order = append(order, name)
			releases = append(releases, release)
			mu.Unlock()
		}()
		assert.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.waiting) == i+1 }, 5*time.Second, time.Millisecond,
			"they ask in this order")
	}
	s.openUp()
	assert.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 2 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	assert.ElementsMatch(t, []string{"TestSoakThirtyLeasesWithCollidingNames", "TestHostileTenants"}, order, "two slots, the two longest first")
	releases[0]()
	for _, want := range []string{"TestA", "TestB", "TestC"} {
		n := len(order)
		mu.Unlock()
		assert.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == n+1 }, 5*time.Second, 5*time.Millisecond)
		mu.Lock()
		assert.Equal(t, want, order[n], "then the others, one slot at a time, in the order they asked")
		releases[len(releases)-1]()
	}
	mu.Unlock()
	wg.Wait()
	assert.Nil(t, newSlots(""), "without DEPLOYFLOW_TEST_PARALLEL, go test's -parallel decides")
}
