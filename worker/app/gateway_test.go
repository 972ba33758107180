package app

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Guards --routing gateway against a Gateway name that is not one: the
// worker checks at start that the Gateway exists, with the listener it
// names, and says which flag to fix; a worker that may not read Gateways
// is not refused (its role predates the check).
func TestCheckGatewayNamesTheFlagToFix(t *testing.T) {
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "public", "namespace": "gateway-system"},
		"spec":     map[string]any{"listeners": []any{map[string]any{"name": "http"}, map[string]any{"name": "https"}}},
	}}
	ctx := context.Background()
	dyn := func() *dynamicfake.FakeDynamicClient {
		d := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gatewaysResource: "GatewayList"})
		// Created by resource: the fake's guess from the kind is
		// "gatewaies".
		_, err := d.Resource(gatewaysResource).Namespace("gateway-system").Create(ctx, gw.DeepCopy(), metav1.CreateOptions{})
		require.NoError(t, err)
		return d
	}
	for _, tc := range []struct {
		ref  manifest.GatewayRef
		want string
	}{
		{manifest.GatewayRef{Namespace: "gateway-system", Name: "public"}, ""},
		{manifest.GatewayRef{Namespace: "gateway-system", Name: "public", Section: "https"}, ""},
		{manifest.GatewayRef{Namespace: "gateway-system", Name: "private"}, "--gateway gateway-system/private: no such Gateway"},
		{manifest.GatewayRef{Namespace: "gateway-system", Name: "public", Section: "web"},
			`--gateway-listener "web": Gateway gateway-system/public has listeners ["http" "https"]: name one of them, or none for every listener`},
	} {
		err := CheckGateway(ctx, dyn(), tc.ref)
		if tc.want == "" {
			assert.NoError(t, err, "%+v", tc.ref)
			continue
		}
		require.Error(t, err, "%+v", tc.ref)
		assert.Contains(t, err.Error(), tc.want)
	}

	forbidden := dyn()
	forbidden.PrependReactor("get", "gateways", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(gatewaysResource.GroupResource(), "public", errors.New("no"))
	})
	err := CheckGateway(ctx, forbidden, manifest.GatewayRef{Namespace: "gateway-system", Name: "public"})
	assert.ErrorIs(t, err, errGatewayUnchecked)
	assert.NoError(t, gatewayChecked(err, slog.New(slog.DiscardHandler), ""), "not readable: logged, not refused")
}

// Guards --cluster-routing: a cluster routed through its Ingresses gets no
// Gateway routing, though the worker routes through one; a cluster routed
// as the worker gets the worker's Gateway by name, written with its own
// client.
func TestAClusterRoutesAsItsRoutingSays(t *testing.T) {
	base := &activities.Activities{Gateway: &activities.GatewayRouting{Ref: manifest.GatewayRef{Namespace: "gateway-system", Name: "public"}}}
	rc := &rest.Config{Host: "https://127.0.0.1:1"}
	cl, err := ClusterOn(config.ClusterRef{Name: "eu-1", Routing: config.RoutingIngress}, rc, base, "10.200.0.0/24", nil)
	require.NoError(t, err)
	assert.Nil(t, cl.Activities.Gateway, "eu-1=ingress: its leases' hostnames are their Ingresses")

	cl, err = ClusterOn(config.ClusterRef{Name: "us-1"}, rc, base, "10.200.0.0/24", nil)
	require.NoError(t, err)
	require.NotNil(t, cl.Activities.Gateway, "as the worker: through the Gateway")
	assert.Equal(t, base.Gateway.Ref, cl.Activities.Gateway.Ref)
	assert.Same(t, cl.Dynamic, cl.Activities.Gateway.Dynamic, "written with the cluster's client")
}
