package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.uber.org/fx"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/manifest"
)

// The Gateway a worker routes through (--routing gateway), checked at
// start in its own cluster and in each of --clusters: a name that is not
// a Gateway there (or a listener it does not have) would leave every
// deploy with a hostname waiting for an acceptance that never comes.

// gatewaysResource is gateway.networking.k8s.io/v1 Gateways.
var gatewaysResource = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}

// errGatewayUnchecked is CheckGateway's answer where the worker may not
// read the Gateway (a role without get on gateways): not a reason to
// refuse to start.
var errGatewayUnchecked = errors.New("the worker may not read the Gateway")

// CheckGateway checks that Gateway ref exists in the cluster dyn serves,
// and has the listener ref.Section if one is named. The error names the
// flag and the fix.
func CheckGateway(ctx context.Context, dyn dynamic.Interface, ref manifest.GatewayRef) error {
	gw, err := dyn.Resource(gatewaysResource).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: %v", errGatewayUnchecked, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("--gateway %s/%s: no such Gateway (%v): create it, install the Gateway API's CRDs (standard channel) if the cluster lacks them, or name an existing Gateway", ref.Namespace, ref.Name, err)
	case err != nil:
		return fmt.Errorf("--gateway %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if ref.Section == "" {
		return nil
	}
	listeners, _, _ := unstructured.NestedSlice(gw.Object, "spec", "listeners")
	var names []string
	for _, l := range listeners {
		name, _, _ := unstructured.NestedString(l.(map[string]any), "name")
		if name == ref.Section {
			return nil
		}
		names = append(names, name)
	}
	return fmt.Errorf("--gateway-listener %q: Gateway %s/%s has listeners %q: name one of them, or none for every listener", ref.Section, ref.Namespace, ref.Name, names)
}

// StartGatewayCheck checks the worker's own cluster's Gateway at start
// (--routing gateway): the worker refuses to start on a Gateway that is
// not there.
func StartGatewayCheck(lc fx.Lifecycle, cfg config.Config, dyn dynamic.Interface, log *slog.Logger) {
	ref := cfg.Routing.Gateway()
	if ref == nil {
		return
	}
	lc.Append(fx.StartHook(func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return gatewayChecked(CheckGateway(ctx, dyn, *ref), log, "")
	}))
}

// gatewayChecked is CheckGateway's err, logged instead where the worker
// may not read Gateways.
func gatewayChecked(err error, log *slog.Logger, cluster string) error {
	if errors.Is(err, errGatewayUnchecked) {
		log.Warn("the Gateway is not checked at start: grant get on gateways to check it", "cluster", cluster, "error", err)
		return nil
	}
	return err
}
