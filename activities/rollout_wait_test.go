package activities

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func rsAt(name, rv string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv,
		Labels: map[string]string{ServiceLabel: "web"}}, Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}}
}

// A rollout's wait may answer from the shared cache only once the cache has
// seen what the workflow decided on: otherwise it would hand the workflow
// an older state than the one it read (issue 11.2).
func TestCaughtUpWith(t *testing.T) {
	cases := []struct {
		name                 string
		cached               []*appsv1.ReplicaSet
		seen                 map[string]string
		caughtUp, comparable bool
	}{
		{"the same versions", []*appsv1.ReplicaSet{rsAt("a", "10", 1), rsAt("b", "12", 1)}, map[string]string{"a": "10", "b": "12"}, true, true},
		{"newer in the cache", []*appsv1.ReplicaSet{rsAt("a", "15", 1)}, map[string]string{"a": "10"}, true, true},
		{"the cache lags (9 < 10, not by string order)", []*appsv1.ReplicaSet{rsAt("a", "9", 1)}, map[string]string{"a": "10"}, false, true},
		{"not cached yet", []*appsv1.ReplicaSet{rsAt("a", "10", 1)}, map[string]string{"a": "10", "b": "11"}, false, true},
		{"a cached one the workflow did not see (created since)", []*appsv1.ReplicaSet{rsAt("a", "10", 1), rsAt("c", "20", 1)}, map[string]string{"a": "10"}, true, true},
		{"not etcd's numbers", []*appsv1.ReplicaSet{rsAt("a", "x1", 1)}, map[string]string{"a": "x1"}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			caughtUp, comparable := caughtUpWith(c.cached, c.seen)
			assert.Equal(t, c.caughtUp, caughtUp, "caught up")
			assert.Equal(t, c.comparable, comparable, "comparable")
		})
	}
}

// fakeCache is an informer cache the test moves on with set.
type fakeCache struct {
	mu      sync.Mutex
	list    []*appsv1.ReplicaSet
	changed chan struct{}
	synced  bool
}

func newFakeCache(rs ...*appsv1.ReplicaSet) *fakeCache {
	return &fakeCache{list: rs, changed: make(chan struct{}), synced: true}
}

// set is the informer's next state: waiters are woken.
func (f *fakeCache) set(rs ...*appsv1.ReplicaSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = rs
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeCache) ReplicaSetsOf(string, string) ([]*appsv1.ReplicaSet, <-chan struct{}, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.list, f.changed, f.synced
}

func TestWaitOnCache(t *testing.T) {
	seen := &snapshot{replicaSets: map[string]*appsv1.ReplicaSet{"a": rsAt("a", "10", 1)}}
	in := WaitForChangeInput{ServiceRef: ServiceRef{Namespace: "ns", Service: "web"}, Digest: seen.state().Digest,
		Timeout: time.Minute, ResourceVersions: map[string]string{"a": "10"}}

	t.Run("returns the cache's newer state as soon as it changes", func(t *testing.T) {
		c := newFakeCache(rsAt("a", "10", 1))
		go func() {
			time.Sleep(50 * time.Millisecond)
			c.set(rsAt("a", "10", 1)) // an event that changes nothing decided on
			time.Sleep(50 * time.Millisecond)
			c.set(rsAt("a", "11", 2))
		}()
		a := &Activities{}
		st, served, err := a.waitOnCache(context.Background(), c, in)
		require.NoError(t, err)
		require.True(t, served)
		require.Len(t, st.ReplicaSets, 1)
		assert.Equal(t, int32(2), *st.ReplicaSets[0].Spec.Replicas)
	})
	t.Run("a lagging cache is not an answer; at the timeout the API server is read", func(t *testing.T) {
		c := newFakeCache(rsAt("a", "9", 5))
		a := &Activities{Kube: fake.NewClientset(rsAt("a", "10", 1))}
		short := in
		short.Timeout = 200 * time.Millisecond
		st, served, err := a.waitOnCache(context.Background(), c, short)
		require.NoError(t, err)
		require.True(t, served)
		require.Len(t, st.ReplicaSets, 1)
		assert.Equal(t, int32(1), *st.ReplicaSets[0].Spec.Replicas, "the API server's state, not the stale cache's 5")
	})
	t.Run("a cache out of sync leaves the wait to list and watch", func(t *testing.T) {
		_, served, err := (&Activities{}).waitOnCache(context.Background(), &fakeCache{}, in)
		require.NoError(t, err)
		assert.False(t, served)
	})
}
