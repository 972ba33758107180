package crds_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/k8s/crds"
	"github.com/deployflow/deployflow/worker/testenv"
)

func TestDefinitions(t *testing.T) {
	defs, err := crds.Definitions()
	require.NoError(t, err)
	byName := map[string]*unstructured.Unstructured{}
	for _, d := range defs {
		byName[d.GetName()] = d
	}
	for _, gvr := range []schema.GroupVersionResource{crds.Leases, crds.HostnameReservations, crds.IPReservations} {
		d := byName[gvr.Resource+"."+gvr.Group]
		require.NotNil(t, d, "CRD for %s", gvr.Resource)
		scope, _, _ := unstructured.NestedString(d.Object, "spec", "scope")
		assert.Equal(t, "Cluster", scope, gvr.Resource)
		versions, _, _ := unstructured.NestedSlice(d.Object, "spec", "versions")
		require.Len(t, versions, 1)
		v := versions[0].(map[string]any)
		assert.Equal(t, crds.Version, v["name"])
		assert.NotEmpty(t, v["additionalPrinterColumns"], "%s has printer columns", gvr.Resource)
	}
	assert.Len(t, defs, 3)
}

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	env := testenv.Get(t)
	dyn, err := dynamic.NewForConfig(env.RESTConfig)
	require.NoError(t, err)
	return dyn
}

func TestInstallIsIdempotentAndConcurrencySafe(t *testing.T) {
	dyn := dynamicClient(t)
	ctx := context.Background()

	require.NoError(t, crds.Install(ctx, dyn))
	require.NoError(t, crds.Install(ctx, dyn), "a second install is a no-op")

	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = crds.Install(ctx, dyn) }()
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err, "concurrent installs")
	}

	crdRes := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, gvr := range []schema.GroupVersionResource{crds.Leases, crds.HostnameReservations, crds.IPReservations} {
		crd, err := dyn.Resource(crdRes).Get(ctx, gvr.Resource+"."+gvr.Group, metav1.GetOptions{})
		require.NoError(t, err)
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		established := false
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				established = true
			}
		}
		assert.True(t, established, "%s is Established", crd.GetName())
		_, err = dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		assert.NoError(t, err, "%s is served", gvr.Resource)
	}
}

// shortName is testenv.Name cut to 30 characters, keeping its random suffix.
func shortName(t *testing.T, prefix string) string {
	n := testenv.Name(t, prefix)
	if len(n) <= 30 {
		return n
	}
	return strings.TrimRight(n[:23], "-") + n[len(n)-7:]
}

func obj(kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crds.APIVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
}

// The schemas reject what the Go code never writes, so a hand-made object
// (kubectl) cannot break the rules either.
func TestSchemaValidation(t *testing.T) {
	dyn := dynamicClient(t)
	ctx := context.Background()
	require.NoError(t, crds.Install(ctx, dyn))
	create := func(gvr schema.GroupVersionResource, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		u, err := dyn.Resource(gvr).Create(ctx, o, metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}) })
		}
		return u, err
	}
	invalid := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		assert.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
	}

	t.Run("lease", func(t *testing.T) {
		name := shortName(t, "l")
		_, err := create(crds.Leases, obj(crds.KindLease, name, map[string]any{"owner": "o", "state": "pending"}))
		invalid(t, err)
		_, err = create(crds.Leases, obj(crds.KindLease, name, map[string]any{"state": "active"}))
		invalid(t, err)
		_, err = create(crds.Leases, obj(crds.KindLease, "x"+name+"-0123456789abcdef", map[string]any{"owner": "o", "state": "active"}))
		invalid(t, err) // longer than 40

		u, err := create(crds.Leases, obj(crds.KindLease, name, map[string]any{"owner": "o", "state": "closed", "closedAt": "2026-01-02T03:04:05Z"}))
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(u.Object, "active", "spec", "state"))
		_, err = dyn.Resource(crds.Leases).Update(ctx, u, metav1.UpdateOptions{})
		invalid(t, err) // closed is final
		require.NoError(t, unstructured.SetNestedField(u.Object, "closed", "spec", "state"))
		require.NoError(t, unstructured.SetNestedField(u.Object, "other", "spec", "owner"))
		_, err = dyn.Resource(crds.Leases).Update(ctx, u, metav1.UpdateOptions{})
		invalid(t, err) // owner is immutable
	})

	t.Run("hostname reservation", func(t *testing.T) {
		host := testenv.Name(t, "h") + ".example.com"
		_, err := create(crds.HostnameReservations, obj(crds.KindHostnameReservation, host, map[string]any{"hostname": "other.example.com", "lease": "l", "owner": "o"}))
		invalid(t, err) // name must be the hostname
		u, err := create(crds.HostnameReservations, obj(crds.KindHostnameReservation, host, map[string]any{"hostname": host, "lease": "l", "owner": "o"}))
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(u.Object, "thief", "spec", "lease"))
		_, err = dyn.Resource(crds.HostnameReservations).Update(ctx, u, metav1.UpdateOptions{})
		invalid(t, err) // immutable: no taking over by update
	})

	t.Run("ip reservation", func(t *testing.T) {
		_, err := create(crds.IPReservations, obj(crds.KindIPReservation, "192.0.2.77", map[string]any{"ip": "192.0.2.78", "lease": "l", "owner": "o", "endpoint": "e"}))
		invalid(t, err) // name must be the address
		_, err = create(crds.IPReservations, obj(crds.KindIPReservation, "not-an-ip", map[string]any{"ip": "not-an-ip", "lease": "l", "owner": "o", "endpoint": "e"}))
		invalid(t, err)
	})
}
