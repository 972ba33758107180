package reserve_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/internal/lease"
	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/worker/testenv"
)

// cluster installs the CRDs on the local cluster and returns a dynamic client.
func cluster(t *testing.T) dynamic.Interface {
	t.Helper()
	env := testenv.Get(t)
	dyn, err := dynamic.NewForConfig(env.RESTConfig)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, crds.Install(ctx, dyn))
	return dyn
}

// leaseID is testenv.Name cut to a valid lease id, keeping its random suffix.
func leaseID(t *testing.T, prefix string) string {
	n := testenv.Name(t, prefix)
	if len(n) > lease.MaxIDLength {
		n = strings.TrimRight(n[:lease.MaxIDLength-7], "-") + n[len(n)-7:]
	}
	require.NoError(t, lease.ValidateID(n))
	return n
}

// host is a hostname unique to this test run.
func host(t *testing.T, prefix string) string {
	return testenv.Name(t, prefix) + ".example.com"
}

// hookedDyn is a dynamic client that calls beforeCreate before each Create,
// to stage a competitor winning a race at an exact moment.
type hookedDyn struct {
	dynamic.Interface
	beforeCreate func(obj *unstructured.Unstructured)
}

func (d hookedDyn) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return hookedRes{NamespaceableResourceInterface: d.Interface.Resource(gvr), before: d.beforeCreate}
}

type hookedRes struct {
	dynamic.NamespaceableResourceInterface
	before func(obj *unstructured.Unstructured)
}

func (r hookedRes) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	r.before(obj)
	return r.NamespaceableResourceInterface.Create(ctx, obj, opts, sub...)
}

// createAs creates a reservation like obj but held by another lease/owner.
func createAs(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, leaseID, owner string) {
	t.Helper()
	c := obj.DeepCopy()
	c.SetLabels(map[string]string{crds.LabelLease: leaseID, crds.LabelOwner: owner})
	require.NoError(t, unstructured.SetNestedField(c.Object, leaseID, "spec", "lease"))
	require.NoError(t, unstructured.SetNestedField(c.Object, owner, "spec", "owner"))
	_, err := dyn.Resource(gvr).Create(context.Background(), c, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(context.Background(), c.GetName(), metav1.DeleteOptions{}) })
}

var poolMu sync.Mutex

// freePool returns a /bits pool inside a random 10.x.y.0/24 of 10.128.0.0/9
// that holds no reservation, so tests (of this run and of a concurrent one)
// do not share pools.
func freePool(t *testing.T, dyn dynamic.Interface, bits int) netip.Prefix {
	t.Helper()
	poolMu.Lock()
	defer poolMu.Unlock()
	list, err := dyn.Resource(crds.IPReservations).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for range 100 {
		p24 := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 128+rand.IntN(128), rand.IntN(256)))
		used := usedPools[p24]
		for _, u := range list.Items {
			ip, _, _ := unstructured.NestedString(u.Object, "spec", "ip")
			if a, err := netip.ParseAddr(ip); err == nil && p24.Contains(a) {
				used = true
			}
		}
		if !used {
			usedPools[p24] = true
			return netip.PrefixFrom(p24.Addr(), bits)
		}
	}
	t.Fatal("no free pool found")
	return netip.Prefix{}
}

var usedPools = map[netip.Prefix]bool{}
