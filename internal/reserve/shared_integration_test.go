package reserve_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/deployflow/deployflow/internal/reserve"
	"github.com/deployflow/deployflow/k8s/crds"
)

// Issue 23.3, global hostnames: one store shared by the clusters "local"
// (its home) and "eu-1". A hostname a lease holds for one cluster is
// refused to another owner's lease in every cluster; the lease's other
// cluster shares it; it is freed only when the last cluster using it
// releases it (a release in one cluster never frees a name another still
// serves). A reservation made before the store was shared counts as the
// home cluster's.
func TestASharedHostnameStoreHoldsANameForOneLeaseAcrossClusters(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	store := reserve.NewHostnames(dyn, nil)
	local, eu := store.Shared("local", "local"), store.Shared("eu-1", "local")
	a, b := leaseID(t, "a"), leaseID(t, "b")
	releaseAllAtEnd(t, store, a, b)
	web := host(t, "web")

	_, err := eu.Reserve(ctx, a, "owner-a", []string{web})
	require.NoError(t, err)
	_, err = local.Reserve(ctx, b, "owner-b", []string{web})
	var conflict *reserve.ConflictError
	require.ErrorAs(t, err, &conflict, "held in eu-1 by another owner's lease: refused in local too")
	assert.Equal(t, a, conflict.HolderLease)

	res, err := local.Reserve(ctx, a, "owner-a", []string{web})
	require.NoError(t, err)
	assert.Equal(t, []string{web}, res.Reserved, "the lease's other cluster shares it")
	assert.Equal(t, map[string]string{
		"deployflow.dev/lease": a, "deployflow.dev/owner": "owner-a",
		reserve.UsedByLabel("local"): "true", reserve.UsedByLabel("eu-1"): "true",
	}, reservation(t, dyn, web).GetLabels())
	for _, v := range []*reserve.Hostnames{local, eu} {
		held, err := v.Held(ctx, a)
		require.NoError(t, err)
		assert.Equal(t, []string{web}, held)
	}

	// eu-1 drops it: local still serves it, so it stays the lease's.
	require.NoError(t, eu.Release(ctx, a, []string{web}))
	held, err := eu.Held(ctx, a)
	require.NoError(t, err)
	assert.Empty(t, held, "eu-1 no longer uses it")
	require.NotNil(t, reservation(t, dyn, web), "a release in one cluster never frees a name another serves")
	_, err = eu.Reserve(ctx, b, "owner-b", []string{web})
	require.ErrorAs(t, err, &conflict, "still held for local")

	// The last cluster lets go: free for anyone.
	require.NoError(t, local.ReleaseAll(ctx, a))
	assert.Nil(t, reservation(t, dyn, web))
	_, err = eu.Reserve(ctx, b, "owner-b", []string{web})
	require.NoError(t, err)

	// Made before sharing (no cluster labels): the home cluster's.
	api := host(t, "api")
	_, err = store.Reserve(ctx, a, "owner-a", []string{api})
	require.NoError(t, err)
	held, err = local.Held(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, []string{api}, held, "home's")
	_, err = eu.Reserve(ctx, a, "owner-a", []string{api})
	require.NoError(t, err)
	labels := reservation(t, dyn, api).GetLabels()
	assert.Equal(t, "true", labels[reserve.UsedByLabel("local")], "home keeps its use when another cluster joins")
	assert.Equal(t, "true", labels[reserve.UsedByLabel("eu-1")])
	require.NoError(t, local.ReleaseAll(ctx, a))
	require.NotNil(t, reservation(t, dyn, api), "eu-1 still uses it")
	require.NoError(t, eu.ReleaseAll(ctx, a))
	assert.Nil(t, reservation(t, dyn, api))
}

// Found in review: a Reserve that lost a race for one hostname took back
// the reservations it created, but not the uses it added to reservations
// its lease held for other clusters: the cluster stayed a user of a name
// it never got to serve, and the name outlived its last real user.
func TestASharedReserveThatLosesARaceTakesBackTheUsesItAdded(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	store := reserve.NewHostnames(dyn, nil)
	a, y := leaseID(t, "a"), leaseID(t, "y")
	releaseAllAtEnd(t, store, a, y)
	shared, contested := host(t, "a-shared"), host(t, "b-contested") // reserved in this order

	_, err := store.Shared("local", "local").Reserve(ctx, a, "owner-a", []string{shared})
	require.NoError(t, err)
	var once sync.Once
	racy := reserve.NewHostnames(hookedDyn{Interface: dyn, beforeCreate: func(obj *unstructured.Unstructured) {
		if obj.GetName() == contested {
			once.Do(func() { createAs(t, dyn, crds.HostnameReservations, obj, y, "owner-y") })
		}
	}}, nil).Shared("eu-1", "local")
	_, err = racy.Reserve(ctx, a, "owner-a", []string{shared, contested})
	var conflict *reserve.ConflictError
	require.ErrorAs(t, err, &conflict)

	labels := reservation(t, dyn, shared).GetLabels()
	assert.Equal(t, "true", labels[reserve.UsedByLabel("local")], "local still uses it")
	assert.NotContains(t, labels, reserve.UsedByLabel("eu-1"), "eu-1's use, added by the failed call, is taken back")
}

// Issue 23.3, global IPs (--global-ips): one pool and store shared by the
// clusters "local" (its home) and "eu-1". A lease's endpoint has the same
// address in both; another lease never gets it in either, though eu-1
// holds nothing of its own; it is freed only when the last cluster using
// it releases it; and an Ensure that fails (the pool exhausted for a
// second endpoint) leaves the cluster without the first.
func TestASharedIPStoreGivesAnEndpointOneAddressInEveryCluster(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	pool := freePool(t, dyn, 30) // two addresses
	store := reserve.NewIPs(dyn, pool)
	local, eu := store.Shared("local", "local"), store.Shared("eu-1", "local")
	a, b := leaseID(t, "a"), leaseID(t, "b")
	releaseIPsAtEnd(t, store, a, b)

	inLocal, err := local.Ensure(ctx, a, "owner-a", []string{"edge"})
	require.NoError(t, err)
	inEU, err := eu.Ensure(ctx, a, "owner-a", []string{"edge"})
	require.NoError(t, err)
	assert.Equal(t, inLocal, inEU, "the lease's endpoint has one address in every cluster")
	addr := inLocal["edge"]
	u, err := dyn.Resource(crds.IPReservations).Get(ctx, addr, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", u.GetLabels()[reserve.UsedByLabel("local")])
	assert.Equal(t, "true", u.GetLabels()[reserve.UsedByLabel("eu-1")])

	other, err := eu.Ensure(ctx, b, "owner-b", []string{"edge"})
	require.NoError(t, err)
	assert.NotEqual(t, addr, other["edge"], "an address is one lease's in every cluster")

	// eu-1 lets go of it (local still serves it); the pool is full, so
	// a's second endpoint cannot be had in eu-1, and the failed call
	// leaves eu-1 without a's first (all or nothing).
	require.NoError(t, eu.Release(ctx, a, []string{"edge"}))
	_, err = eu.Ensure(ctx, a, "owner-a", []string{"edge", "web"})
	var exhausted *reserve.PoolExhaustedError
	require.ErrorAs(t, err, &exhausted)
	u, err = dyn.Resource(crds.IPReservations).Get(ctx, addr, metav1.GetOptions{})
	require.NoError(t, err, "local still uses it")
	assert.NotContains(t, u.GetLabels(), reserve.UsedByLabel("eu-1"), "the failed call gave eu-1 nothing")
	declared, err := eu.Declared(ctx, a)
	require.NoError(t, err)
	assert.Empty(t, declared, "eu-1 declares nothing of a")
	declared, err = local.Declared(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"edge": addr}, declared)

	// The last cluster lets go: free for anyone.
	require.NoError(t, local.ReleaseAll(ctx, a))
	_, err = dyn.Resource(crds.IPReservations).Get(ctx, addr, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "released by its last user: %v", err)
	got, err := eu.Ensure(ctx, b, "owner-b", []string{"edge", "web"})
	require.NoError(t, err)
	assert.Equal(t, other["edge"], got["edge"])
	assert.Equal(t, addr, got["web"])
}
