package reserve_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/internal/reserve"
	"github.com/deployflow/deployflow/k8s/crds"
)

func releaseAllAtEnd(t *testing.T, h *reserve.Hostnames, leases ...string) {
	t.Cleanup(func() {
		for _, l := range leases {
			if err := h.ReleaseAll(context.Background(), l); err != nil {
				t.Logf("release hostnames of %s: %v", l, err)
			}
		}
	})
}

func reservation(t *testing.T, dyn dynamic.Interface, hostname string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn.Resource(crds.HostnameReservations).Get(context.Background(), hostname, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return u
}

func TestHostnamesReserveHeldRelease(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	h := reserve.NewHostnames(dyn, nil)
	a := leaseID(t, "a")
	releaseAllAtEnd(t, h, a)
	web, api := host(t, "web"), host(t, "api")

	check, err := h.Check(ctx, a, "owner-a", []string{web, api})
	require.NoError(t, err)
	assert.Equal(t, reserve.HostnameResult{Reserved: sorted(web, api)}, check)
	held, err := h.Held(ctx, a)
	require.NoError(t, err)
	assert.Empty(t, held, "Check changes nothing")

	res, err := h.Reserve(ctx, a, "owner-a", []string{web, strings.ToUpper(api) + ".", web})
	require.NoError(t, err)
	assert.Equal(t, reserve.HostnameResult{Reserved: sorted(web, api)}, res, "check predicted it")

	held, err = h.Held(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, sorted(web, api), held)

	u := reservation(t, dyn, web)
	require.NotNil(t, u)
	assert.Equal(t, map[string]string{crds.LabelLease: a, crds.LabelOwner: "owner-a"}, u.GetLabels())
	spec, _, _ := unstructured.NestedStringMap(u.Object, "spec")
	assert.Equal(t, map[string]string{"hostname": web, "lease": a, "owner": "owner-a"}, spec)

	res, err = h.Reserve(ctx, a, "owner-a", []string{web, api})
	require.NoError(t, err, "reserve is idempotent")
	assert.Equal(t, sorted(web, api), res.Reserved)
	check, err = h.Check(ctx, a, "owner-a", []string{web, api})
	require.NoError(t, err)
	assert.Equal(t, sorted(web, api), check.Reserved)

	require.NoError(t, h.Release(ctx, a, []string{web, host(t, "never-held")}))
	held, err = h.Held(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, []string{api}, held, "release drops only the named hostnames")
	require.NoError(t, h.Release(ctx, a, []string{web}), "releasing again is fine")

	require.NoError(t, h.ReleaseAll(ctx, a))
	held, err = h.Held(ctx, a)
	require.NoError(t, err)
	assert.Empty(t, held)
	assert.Nil(t, reservation(t, dyn, api))
	require.NoError(t, h.ReleaseAll(ctx, a))
}

func sorted(s ...string) []string { return slices.Sorted(slices.Values(s)) }

func TestHostnamesConflictWithAnotherOwner(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	h := reserve.NewHostnames(dyn, nil)
	a, b := leaseID(t, "a"), leaseID(t, "b")
	releaseAllAtEnd(t, h, a, b)
	taken, free := host(t, "b-taken"), host(t, "a-free")

	_, err := h.Reserve(ctx, a, "owner-a", []string{taken})
	require.NoError(t, err)

	want := &reserve.ConflictError{Hostname: taken, HolderLease: a, HolderOwner: "owner-a"}
	_, err = h.Check(ctx, b, "owner-b", []string{free, taken})
	var conflict *reserve.ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, want, conflict)

	res, err := h.Reserve(ctx, b, "owner-b", []string{free, taken})
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, want, conflict)
	assert.Equal(t, "hostname "+taken+" is held by lease "+a+" of owner owner-a", err.Error())
	assert.Empty(t, res.Reserved)
	assert.Nil(t, reservation(t, dyn, free), "nothing is created for the losing lease")
	held, err := h.Held(ctx, b)
	require.NoError(t, err)
	assert.Empty(t, held)

	// The losing lease cannot release the winner's hostname.
	require.NoError(t, h.Release(ctx, b, []string{taken}))
	require.NoError(t, h.ReleaseAll(ctx, b))
	held, err = h.Held(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, []string{taken}, held)

	// Once released, the other owner can have it.
	require.NoError(t, h.Release(ctx, a, []string{taken}))
	res, err = h.Reserve(ctx, b, "owner-b", []string{free, taken})
	require.NoError(t, err)
	assert.Equal(t, sorted(free, taken), res.Reserved)
}

func TestHostnamesWithheldForSameOwnersOtherLease(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	h := reserve.NewHostnames(dyn, nil)
	a, c := leaseID(t, "a"), leaseID(t, "c")
	releaseAllAtEnd(t, h, a, c)
	shared, own := host(t, "shared"), host(t, "own")

	_, err := h.Reserve(ctx, a, "owner", []string{shared})
	require.NoError(t, err)

	want := reserve.HostnameResult{Reserved: []string{own}, Withheld: []reserve.Withheld{{Hostname: shared, Lease: a}}}
	check, err := h.Check(ctx, c, "owner", []string{shared, own})
	require.NoError(t, err)
	assert.Equal(t, want, check)
	res, err := h.Reserve(ctx, c, "owner", []string{shared, own})
	require.NoError(t, err)
	assert.Equal(t, want, res)

	held, err := h.Held(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, []string{shared}, held, "not taken over")
	held, err = h.Held(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, []string{own}, held)

	require.NoError(t, h.ReleaseAll(ctx, a))
	res, err = h.Reserve(ctx, c, "owner", []string{shared, own})
	require.NoError(t, err)
	assert.Equal(t, reserve.HostnameResult{Reserved: sorted(shared, own)}, res)
}

func TestHostnamesBlocked(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	exact, zone := host(t, "exact"), host(t, "zone")
	h := reserve.NewHostnames(dyn, []string{strings.ToUpper(exact), "." + zone})
	a := leaseID(t, "a")
	releaseAllAtEnd(t, h, a)
	ok := host(t, "a-ok")

	var blocked *reserve.BlockedError
	_, err := h.Reserve(ctx, a, "owner-a", []string{ok, exact})
	require.ErrorAs(t, err, &blocked)
	assert.Equal(t, &reserve.BlockedError{Hostname: exact, Rule: exact}, blocked)
	assert.Nil(t, reservation(t, dyn, ok), "nothing is reserved when one hostname is blocked")

	_, err = h.Check(ctx, a, "owner-a", []string{"www." + zone})
	require.ErrorAs(t, err, &blocked)
	assert.Equal(t, &reserve.BlockedError{Hostname: "www." + zone, Rule: "." + zone}, blocked)
	_, err = h.Reserve(ctx, a, "owner-a", []string{"a.b." + zone})
	require.ErrorAs(t, err, &blocked)
	assert.Equal(t, "."+zone, blocked.Rule)
	assert.Contains(t, err.Error(), "a.b."+zone)

	res, err := h.Reserve(ctx, a, "owner-a", []string{zone, ok})
	require.NoError(t, err, "a .suffix rule does not block the suffix itself")
	assert.Equal(t, sorted(zone, ok), res.Reserved)

	_, err = h.Reserve(ctx, a, "owner-a", []string{"*.example.com"})
	assert.ErrorIs(t, err, reserve.ErrInvalidHostname)
}

// Another owner takes a hostname between Reserve's check and its create:
// the call fails with a ConflictError, deletes what it created itself, and
// keeps what the lease held before the call.
func TestHostnamesReserveRollsBackOnLostRace(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	x := leaseID(t, "x")
	plain := reserve.NewHostnames(dyn, nil)
	releaseAllAtEnd(t, plain, x)
	before, mine, contested := host(t, "a-before"), host(t, "b-mine"), host(t, "c-contested")

	_, err := plain.Reserve(ctx, x, "owner-x", []string{before})
	require.NoError(t, err)

	y := leaseID(t, "y")
	var once sync.Once
	racy := reserve.NewHostnames(hookedDyn{Interface: dyn, beforeCreate: func(obj *unstructured.Unstructured) {
		if obj.GetName() == contested {
			once.Do(func() { createAs(t, dyn, crds.HostnameReservations, obj, y, "owner-y") })
		}
	}}, nil)
	_, err = racy.Reserve(ctx, x, "owner-x", []string{before, mine, contested})
	var conflict *reserve.ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, &reserve.ConflictError{Hostname: contested, HolderLease: y, HolderOwner: "owner-y"}, conflict)

	held, err := plain.Held(ctx, x)
	require.NoError(t, err)
	assert.Equal(t, []string{before}, held, "created in the call: rolled back; held before: kept")
	assert.Nil(t, reservation(t, dyn, mine))
}

func TestHostnamesRaceHasExactlyOneWinner(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	contested := host(t, "contested")

	// Every lease passes Reserve's check before any creates: the ten
	// Creates of the same name race at the API server.
	const n = 10
	var arrived sync.WaitGroup
	arrived.Add(n)
	h := reserve.NewHostnames(hookedDyn{Interface: dyn, beforeCreate: func(*unstructured.Unstructured) {
		arrived.Done()
		arrived.Wait()
	}}, nil)
	leases := make([]string, n)
	for i := range leases {
		leases[i] = leaseID(t, "r")
	}
	releaseAllAtEnd(t, h, leases...)

	start := make(chan struct{})
	results := make([]reserve.HostnameResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = h.Reserve(ctx, leases[i], "owner-"+string(rune('a'+i)), []string{contested})
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i := range n {
		if errs[i] == nil {
			assert.Equal(t, -1, winner, "only one winner")
			winner = i
			assert.Equal(t, []string{contested}, results[i].Reserved)
			continue
		}
		var conflict *reserve.ConflictError
		if assert.True(t, errors.As(errs[i], &conflict), "lease %d: %v", i, errs[i]) {
			assert.Equal(t, contested, conflict.Hostname)
		}
	}
	require.NotEqual(t, -1, winner, "someone wins")
	for i := range n {
		var conflict *reserve.ConflictError
		if errors.As(errs[i], &conflict) {
			assert.Equal(t, leases[winner], conflict.HolderLease)
			assert.Equal(t, "owner-"+string(rune('a'+winner)), conflict.HolderOwner)
		}
	}
	u := reservation(t, dyn, contested)
	require.NotNil(t, u)
	holder, _, _ := unstructured.NestedString(u.Object, "spec", "lease")
	assert.Equal(t, leases[winner], holder)
}
