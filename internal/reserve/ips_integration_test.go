package reserve_test

import (
	"context"
	"fmt"
	"net/netip"
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

func releaseIPsAtEnd(t *testing.T, ips *reserve.IPs, leases ...string) {
	t.Cleanup(func() {
		for _, l := range leases {
			if err := ips.ReleaseAll(context.Background(), l); err != nil {
				t.Logf("release IPs of %s: %v", l, err)
			}
		}
	})
}

// nth is the n-th address of the pool's prefix (0 = network address).
func nth(p netip.Prefix, n int) string {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a.String()
}

func TestIPsEnsureDeclaredRelease(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	pool := freePool(t, dyn, 24)
	ips := reserve.NewIPs(dyn, pool)
	a := leaseID(t, "a")
	releaseIPsAtEnd(t, ips, a)

	got, err := ips.Ensure(ctx, a, "owner-a", []string{"web", "db"})
	require.NoError(t, err)
	// Endpoints are allocated in name order, lowest free address first.
	assert.Equal(t, map[string]string{"db": nth(pool, 1), "web": nth(pool, 2)}, got)
	assert.NotEqual(t, got["web"], got["db"])
	for _, ip := range got {
		assert.True(t, ips.Pool().Contains(netip.MustParseAddr(ip)), ip)
	}

	u, err := dyn.Resource(crds.IPReservations).Get(ctx, got["web"], metav1.GetOptions{})
	require.NoError(t, err, "the reservation is named after the address")
	assert.Equal(t, map[string]string{crds.LabelLease: a, crds.LabelOwner: "owner-a", crds.LabelEndpoint: "web"}, u.GetLabels())
	spec, _, _ := unstructured.NestedStringMap(u.Object, "spec")
	assert.Equal(t, map[string]string{"ip": got["web"], "lease": a, "owner": "owner-a", "endpoint": "web"}, spec)

	again, err := ips.Ensure(ctx, a, "owner-a", []string{"db", "web", "web"})
	require.NoError(t, err)
	assert.Equal(t, got, again, "an endpoint keeps its address")
	only, err := ips.Ensure(ctx, a, "owner-a", []string{"web"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"web": got["web"]}, only)

	declared, err := ips.Declared(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, got, declared)

	more, err := ips.Ensure(ctx, a, "owner-a", []string{"web", "db", "ssh"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"db": nth(pool, 1), "web": nth(pool, 2), "ssh": nth(pool, 3)}, more)

	require.NoError(t, ips.Release(ctx, a, []string{"db", "unknown"}))
	declared, err = ips.Declared(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"web": nth(pool, 2), "ssh": nth(pool, 3)}, declared)
	require.NoError(t, ips.Release(ctx, a, []string{"db"}), "releasing again is fine")

	// The freed address is the lowest free one again.
	next, err := ips.Ensure(ctx, a, "owner-a", []string{"web", "ssh", "api"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"web": nth(pool, 2), "ssh": nth(pool, 3), "api": nth(pool, 1)}, next)

	require.NoError(t, ips.ReleaseAll(ctx, a))
	declared, err = ips.Declared(ctx, a)
	require.NoError(t, err)
	assert.Empty(t, declared)
}

func TestIPsAllocationSkipsTakenAddresses(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	pool := freePool(t, dyn, 24)
	b, c, intruder := leaseID(t, "b"), leaseID(t, "c"), leaseID(t, "i")

	ips := reserve.NewIPs(dyn, pool)
	releaseIPsAtEnd(t, ips, b, c)
	gotB, err := ips.Ensure(ctx, b, "owner-b", []string{"x"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"x": nth(pool, 1)}, gotB)

	// Another lease claims .2 between c's listing and its create: c gets
	// AlreadyExists and moves on to .3.
	var once sync.Once
	racy := reserve.NewIPs(hookedDyn{Interface: dyn, beforeCreate: func(obj *unstructured.Unstructured) {
		if obj.GetName() == nth(pool, 2) {
			once.Do(func() { createAs(t, dyn, crds.IPReservations, obj, intruder, "owner-i") })
		}
	}}, pool)
	gotC, err := racy.Ensure(ctx, c, "owner-c", []string{"y"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"y": nth(pool, 3)}, gotC)

	u, err := dyn.Resource(crds.IPReservations).Get(ctx, nth(pool, 2), metav1.GetOptions{})
	require.NoError(t, err)
	holder, _, _ := unstructured.NestedString(u.Object, "spec", "lease")
	assert.Equal(t, intruder, holder, "never taken over")

	// Releasing another lease's endpoint does nothing to it.
	require.NoError(t, ips.Release(ctx, c, []string{"x"}))
	require.NoError(t, ips.ReleaseAll(ctx, c))
	declared, err := ips.Declared(ctx, b)
	require.NoError(t, err)
	assert.Equal(t, gotB, declared)
}

func TestIPsPoolExhausted(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	pool := freePool(t, dyn, 30) // two usable addresses
	ips := reserve.NewIPs(dyn, pool)
	d, e, f := leaseID(t, "d"), leaseID(t, "e"), leaseID(t, "f")
	releaseIPsAtEnd(t, ips, d, e, f)

	// All or nothing: f's two allocations are undone when the third fails.
	_, err := ips.Ensure(ctx, f, "owner-f", []string{"p", "q", "r"})
	var exhausted *reserve.PoolExhaustedError
	require.ErrorAs(t, err, &exhausted)
	assert.Equal(t, &reserve.PoolExhaustedError{Pool: pool, Lease: f, Endpoint: "r"}, exhausted)
	declared, err := ips.Declared(ctx, f)
	require.NoError(t, err)
	assert.Empty(t, declared)

	got, err := ips.Ensure(ctx, d, "owner-d", []string{"a", "b"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": nth(pool, 1), "b": nth(pool, 2)}, got, "network and broadcast are never handed out")

	_, err = ips.Ensure(ctx, e, "owner-e", []string{"c"})
	require.ErrorAs(t, err, &exhausted)
	assert.Contains(t, err.Error(), pool.String())
	assert.Contains(t, err.Error(), "exhausted")

	// Asking for one more keeps what d holds.
	_, err = ips.Ensure(ctx, d, "owner-d", []string{"a", "b", "c"})
	require.ErrorAs(t, err, &exhausted)
	declared, err = ips.Declared(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, got, declared)

	require.NoError(t, ips.Release(ctx, d, []string{"a"}))
	gotE, err := ips.Ensure(ctx, e, "owner-e", []string{"c"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"c": nth(pool, 1)}, gotE)
}

func TestIPsRacingLeasesNeverShareAnAddress(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	pool := freePool(t, dyn, 28) // 14 usable addresses
	ips := reserve.NewIPs(dyn, pool)

	const n = 4
	leases := make([]string, n)
	for i := range leases {
		leases[i] = leaseID(t, "r")
	}
	releaseIPsAtEnd(t, ips, leases...)

	start := make(chan struct{})
	results := make([]map[string]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = ips.Ensure(ctx, leases[i], fmt.Sprintf("owner-%d", i), []string{"e1", "e2", "e3"})
		}()
	}
	close(start)
	wg.Wait()

	seen := map[string]string{}
	for i := range n {
		require.NoError(t, errs[i], leases[i])
		require.Len(t, results[i], 3)
		for ep, ip := range results[i] {
			assert.True(t, ips.Pool().Contains(netip.MustParseAddr(ip)), ip)
			if other, dup := seen[ip]; dup {
				t.Errorf("%s is given to %s and to %s/%s", ip, other, leases[i], ep)
			}
			seen[ip] = leases[i] + "/" + ep
		}
		declared, err := ips.Declared(ctx, leases[i])
		require.NoError(t, err)
		assert.Equal(t, results[i], declared)
	}
	assert.Len(t, seen, 3*n)
}

// Retries of one lease's Ensure running at once (an activity retried while
// the first attempt still runs) settle on one address per endpoint.
func TestIPsConcurrentEnsureOfOneLeaseConverges(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	pool := freePool(t, dyn, 24)
	ips := reserve.NewIPs(dyn, pool)
	a := leaseID(t, "a")
	releaseIPsAtEnd(t, ips, a)

	const n = 4
	start := make(chan struct{})
	results := make([]map[string]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = ips.Ensure(ctx, a, "owner-a", []string{"web", "db"})
		}()
	}
	close(start)
	wg.Wait()

	declared, err := ips.Declared(ctx, a)
	require.NoError(t, err)
	require.Len(t, declared, 2)
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, declared, results[i])
	}
	list, err := dyn.Resource(crds.IPReservations).List(ctx, metav1.ListOptions{LabelSelector: crds.LabelLease + "=" + a})
	require.NoError(t, err)
	assert.Len(t, list.Items, 2, "one reservation per endpoint")
}

// A duplicate reservation for an endpoint (left by concurrent attempts) is
// released by the next Ensure, which keeps the older address.
func TestIPsEnsureDropsDuplicates(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	pool := freePool(t, dyn, 24)
	ips := reserve.NewIPs(dyn, pool)
	a := leaseID(t, "a")
	releaseIPsAtEnd(t, ips, a)

	got, err := ips.Ensure(ctx, a, "owner-a", []string{"web"})
	require.NoError(t, err)

	dup := nth(pool, 9)
	reserveByHand(t, dyn, dup, a, "owner-a", "web")

	again, err := ips.Ensure(ctx, a, "owner-a", []string{"web"})
	require.NoError(t, err)
	assert.Equal(t, got, again)
	_, err = dyn.Resource(crds.IPReservations).Get(ctx, dup, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the duplicate is released: %v", err)
}

// Guards a race seen in CI (TestIPsConcurrentEnsureOfOneLeaseConverges
// failing under load): two concurrent Ensure calls of one lease created
// reservations for the same endpoint within one second, the higher address
// first. The first call had already returned that address; the duplicate
// was then resolved by creation timestamp (one-second resolution) and, on a
// tie, the lower address, so the address the first call returned was
// released. The reservation created first must win, whatever its address.
func TestIPsDuplicateInTheSameSecondKeepsTheFirstCreated(t *testing.T) {
	dyn := cluster(t)
	ctx := context.Background()
	pool := freePool(t, dyn, 24)
	ips := reserve.NewIPs(dyn, pool)
	a := leaseID(t, "a")
	releaseIPsAtEnd(t, ips, a)
	reserveAs := func(addr string) *unstructured.Unstructured { return reserveByHand(t, dyn, addr, a, "owner-a", "web") }
	first, second := nth(pool, 7), nth(pool, 3) // the first created has the higher address
	for {
		f, s := reserveAs(first), reserveAs(second)
		ft, st := f.GetCreationTimestamp(), s.GetCreationTimestamp()
		if ft.Equal(&st) {
			break // the same second: the case timestamps cannot order
		}
		require.NoError(t, ips.ReleaseAll(ctx, a)) // straddled a second: again
	}
	got, err := ips.Ensure(ctx, a, "owner-a", []string{"web"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"web": first}, got, "the reservation created first wins")
	_, err = dyn.Resource(crds.IPReservations).Get(ctx, second, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the later duplicate is released: %v", err)
}

// reserveByHand creates an IPReservation of addr for the lease's endpoint
// directly, as a concurrent Ensure would have.
func reserveByHand(t *testing.T, dyn dynamic.Interface, addr, lease, owner, endpoint string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn.Resource(crds.IPReservations).Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crds.APIVersion, "kind": crds.KindIPReservation,
		"metadata": map[string]any{"name": addr, "labels": map[string]any{crds.LabelLease: lease, crds.LabelOwner: owner, crds.LabelEndpoint: endpoint}},
		"spec":     map[string]any{"ip": addr, "lease": lease, "owner": owner, "endpoint": endpoint},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return u
}
