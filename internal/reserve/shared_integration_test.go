package reserve_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
