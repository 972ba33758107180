package config

import (
	"flag"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/deployflow/deployflow/internal/manifest"
)

// Routing is where a lease's hostnames go (issue 38.3): the lease's
// Ingress (the default, for operators with an Ingress controller), or
// HTTPRoutes on the operator's Gateway.
type Routing struct {
	// RoutingMode (--routing, DEPLOYFLOW_ROUTING): "ingress" or "gateway".
	RoutingMode string
	// GatewayName (--gateway, DEPLOYFLOW_GATEWAY): namespace/name of the
	// Gateway the routes are parented to; GatewayListener
	// (--gateway-listener, DEPLOYFLOW_GATEWAY_LISTENER) its listener ("":
	// every listener).
	GatewayName, GatewayListener string
}

// Routing modes.
const (
	RoutingIngress = "ingress"
	RoutingGateway = "gateway"
)

// RegisterFlags adds --routing, --gateway and --gateway-listener.
func (r *Routing) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&r.RoutingMode, "routing", env("DEPLOYFLOW_ROUTING", RoutingIngress), "worker: where a lease's hostnames go: ingress (the lease's Ingress) or gateway (HTTPRoutes on --gateway) (env DEPLOYFLOW_ROUTING)")
	fs.StringVar(&r.GatewayName, "gateway", env("DEPLOYFLOW_GATEWAY", ""), "worker, --routing gateway: the Gateway a lease's HTTPRoutes are parented to, as namespace/name (env DEPLOYFLOW_GATEWAY)")
	fs.StringVar(&r.GatewayListener, "gateway-listener", env("DEPLOYFLOW_GATEWAY_LISTENER", ""), "worker, --routing gateway: the Gateway's listener (section) the routes attach to; empty: every listener (env DEPLOYFLOW_GATEWAY_LISTENER)")
}

// Gateway is the Gateway the routes are parented to, or nil with
// --routing ingress.
func (r Routing) Gateway() *manifest.GatewayRef {
	if r.RoutingMode != RoutingGateway {
		return nil
	}
	ns, name, _ := strings.Cut(r.GatewayName, "/")
	return &manifest.GatewayRef{Namespace: ns, Name: name, Section: r.GatewayListener}
}

func (r Routing) validate() []error {
	var errs []error
	switch r.RoutingMode {
	case RoutingIngress:
		if r.GatewayName != "" {
			errs = append(errs, fmt.Errorf("--gateway %s: routes go to a Gateway only with --routing gateway (env DEPLOYFLOW_ROUTING)", r.GatewayName))
		}
	case RoutingGateway:
		ns, name, ok := strings.Cut(r.GatewayName, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			errs = append(errs, fmt.Errorf("--gateway %q: give the Gateway as namespace/name, e.g. gateway-system/public (env DEPLOYFLOW_GATEWAY)", r.GatewayName))
		}
		if l := r.GatewayListener; l != "" && len(validation.IsDNS1123Subdomain(l)) > 0 {
			errs = append(errs, fmt.Errorf("--gateway-listener %q: want a listener's name, e.g. http (env DEPLOYFLOW_GATEWAY_LISTENER)", l))
		}
	default:
		errs = append(errs, fmt.Errorf("--routing %q: want ingress or gateway (env DEPLOYFLOW_ROUTING)", r.RoutingMode))
	}
	return errs
}
