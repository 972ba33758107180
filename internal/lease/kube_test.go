package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/worker/testenv"
)

// store installs the CRDs and returns a KubeStore on the local cluster and a
// function that makes the test delete a lease when it ends.
func store(t *testing.T) (*lease.KubeStore, func(id string)) {
	t.Helper()
	env := testenv.Get(t)
	dyn, err := dynamic.NewForConfig(env.RESTConfig)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, crds.Install(ctx, dyn))
	cleanup := func(id string) {
		t.Cleanup(func() {
			err := dyn.Resource(crds.Leases).Delete(context.Background(), id, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Logf("delete lease %s: %v", id, err)
			}
		})
	}
	return lease.NewKubeStore(dyn), cleanup
}

// leaseID is testenv.Name cut to a valid lease id, keeping its random suffix.
func leaseID(t *testing.T, prefix string) string {
	n := testenv.Name(t, prefix)
	if len(n) <= lease.MaxIDLength {
		return n
	}
	return strings.TrimRight(n[:lease.MaxIDLength-7], "-") + n[len(n)-7:]
}

func TestKubeStoreLifecycle(t *testing.T) {
	s, cleanup := store(t)
	ctx := context.Background()
	id := leaseID(t, "l")
	cleanup(id)
	require.NoError(t, lease.ValidateID(id))

	_, err := s.Get(ctx, id)
	require.ErrorIs(t, err, lease.ErrNotFound)

	l, err := s.Create(ctx, id, "tenant-a")
	require.NoError(t, err)
	assert.NotEmpty(t, l.UID, "the lease record's UID owns its namespace")
	assert.Equal(t, lease.Lease{ID: id, Owner: "tenant-a", State: lease.StateActive, UID: l.UID}, *l)
	assert.True(t, l.Active())

	again, err := s.Create(ctx, id, "tenant-a")
	require.NoError(t, err, "create is idempotent for the same owner")
	assert.Equal(t, l, again)

	_, err = s.Create(ctx, id, "tenant-b")
	require.ErrorIs(t, err, lease.ErrOwnerMismatch)
	assert.Contains(t, err.Error(), "tenant-a")

	got, err := s.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, l, got)

	before := time.Now().Add(-time.Second)
	closed, err := s.Close(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, lease.StateClosed, closed.State)
	require.NotNil(t, closed.ClosedAt)
	assert.WithinRange(t, *closed.ClosedAt, before, time.Now().Add(time.Second))

	again, err = s.Close(ctx, id)
	require.NoError(t, err, "close is idempotent")
	assert.Equal(t, closed, again)

	again, err = s.Create(ctx, id, "tenant-a")
	require.NoError(t, err)
	assert.Equal(t, lease.StateClosed, again.State, "a closed lease is never reopened")

	second := leaseID(t, "m")
	cleanup(second)
	_, err = s.Create(ctx, second, "tenant-b")
	require.NoError(t, err)

	all, err := s.List(ctx)
	require.NoError(t, err)
	mine := map[string]lease.Lease{}
	for i, l := range all {
		if i > 0 {
			assert.Less(t, all[i-1].ID, l.ID, "sorted by id")
		}
		if l.ID == id || l.ID == second {
			mine[l.ID] = l
		}
	}
	assert.Equal(t, *closed, mine[id])
	assert.Equal(t, lease.Lease{ID: second, Owner: "tenant-b", State: lease.StateActive, UID: mine[second].UID}, mine[second])
}

func TestKubeStoreUnknownAndInvalid(t *testing.T) {
	s, cleanup := store(t)
	ctx := context.Background()
	id := leaseID(t, "u")
	cleanup(id)

	_, err := s.Close(ctx, id)
	assert.ErrorIs(t, err, lease.ErrNotFound)
	_, err = s.Get(ctx, id)
	assert.ErrorIs(t, err, lease.ErrNotFound)

	_, err = s.Create(ctx, "Not_Valid", "tenant-a")
	assert.Error(t, err)
	assert.False(t, errors.Is(err, lease.ErrNotFound))
	_, err = s.Create(ctx, id, "")
	assert.Error(t, err)
	_, err = s.Get(ctx, id)
	assert.ErrorIs(t, err, lease.ErrNotFound, "a rejected create creates nothing")
}
