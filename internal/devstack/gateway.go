package devstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/deployflow/deployflow/k8s/crds"
)

// The Gateway (issue 38.2): a real Gateway API implementation in front of
// the data plane. Traefik v3 runs outside the cluster, as the other
// components do, against the stack's API server with a ServiceAccount's
// token: it implements the Gateway API's standard channel in Go (so it
// builds from the module proxy like the rest; Envoy-based gateways need
// Envoy, a C++ binary), watches Gateways, HTTPRoutes and EndpointSlices,
// routes to the endpoints' addresses (the data plane's pods) and writes the
// routes' status: Accepted and ResolvedRefs for each generation, which is
// how a caller knows a route, and its weights, are programmed.
//
// The stack installs the Gateway API CRDs (standard channel, the version
// Traefik is built against), a GatewayClass, and one Gateway,
// deployflow-gateway/deployflow, listening for HTTP on GatewayAddress and
// taking routes from every namespace.

// Gateway is the Traefik component.
const Gateway = "gateway"

const (
	// GatewayAddress is where the Gateway's HTTP listener serves.
	GatewayAddress = "127.0.0.1:" + gatewayPort
	gatewayPort    = "18000"
	// gatewayPingAddr is Traefik's own entrypoint (its /ping).
	gatewayPingAddr = "127.0.0.1:18080"
	// GatewayNamespace and GatewayName name the stack's Gateway; section
	// GatewayListener is its HTTP listener.
	GatewayNamespace = "deployflow-gateway"
	GatewayName      = "deployflow"
	GatewayListener  = "http"
	// GatewayClassName is the stack's GatewayClass, GatewayController the
	// controller that implements it (Traefik's).
	GatewayClassName  = "deployflow-traefik"
	GatewayController = "traefik.io/gateway-controller"
	gatewayAccount    = "traefik"
)

// Gateway API resources.
var (
	GatewayClasses = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	Gateways       = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
)

func (s *Stack) gatewayCRDDir() string {
	return filepath.Join(s.CacheDir, "gateway-api-"+s.Versions["GATEWAY_API_VERSION"], "crds")
}

// gatewaySite is where a Traefik serves a cluster's Gateway: the stack's
// own cluster's, or an extra cluster's (ClusterGateway).
type gatewaySite struct {
	process    string // its recorded name
	kubeconfig string // the cluster's admin kubeconfig
	apiPort    string // the cluster's API server
	port       string // the Gateway's HTTP listener, on 127.0.0.1
	pingAddr   string // Traefik's own /ping
	dir        string // its configuration
}

func (s *Stack) gatewaySite() gatewaySite {
	return gatewaySite{process: Gateway, kubeconfig: s.Kubeconfig(), apiPort: apiServerPort, port: gatewayPort,
		pingAddr: gatewayPingAddr, dir: filepath.Join(s.RunDir, "gateway")}
}

// clusterGatewaySite is extra cluster name's (number n): its listener on
// 18000+n, its /ping on 18100+n.
func (s *Stack) clusterGatewaySite(name string, n int) gatewaySite {
	api, _, _ := clusterPorts(n)
	return gatewaySite{process: clusterProcess(Gateway, name), kubeconfig: s.ClusterKubeconfig(name), apiPort: api,
		port: strconv.Itoa(18000 + n), pingAddr: "127.0.0.1:" + strconv.Itoa(18100+n), dir: filepath.Join(s.clusterDir(name), "gateway")}
}

func (s *Stack) gatewayComponent() component { return s.gatewayComponentAt(s.gatewaySite()) }

func (s *Stack) gatewayComponentAt(site gatewaySite) component {
	return component{
		// Its static configuration, with the token, is written by
		// before (traefikConfig).
		// KUBECONFIG emptied: Traefik's Gateway provider would take the
		// cluster of the caller's KUBECONFIG over its configured endpoint
		// (an extra cluster's Gateway served the stack's own Gateway).
		process: process{name: site.process, bin: s.Bin(Gateway), args: []string{"--configFile=" + filepath.Join(site.dir, "traefik.yaml")},
			env: []string{"KUBECONFIG="}},
		before: func(ctx context.Context) error { return s.prepareGateway(ctx, site) },
		ready:  httpOK("http://"+site.pingAddr+"/ping", "OK"),
		// The first start reads every Gateway API object and programs
		// the Gateway.
		timeout: 60 * time.Second,
	}
}

// ClusterGateway starts a Gateway in extra cluster name (number n, started
// by StartCluster): the same Gateway API CRDs, GatewayClass and Gateway
// (GatewayNamespace/GatewayName, listener GatewayListener) as the stack's
// own cluster has, served by a Traefik of its own (stopped with the
// cluster), listening on the address it returns. Requests through it reach
// no pod: the data plane serves the stack's own cluster's.
func (s *Stack) ClusterGateway(ctx context.Context, name string, n int) (string, error) {
	site := s.clusterGatewaySite(name, n)
	unlock, err := s.clusterLock(name)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := s.upComponent(ctx, s.gatewayComponentAt(site)); err != nil {
		return "", fmt.Errorf("cluster %s: %w", name, err)
	}
	return "127.0.0.1:" + site.port, nil
}

// prepareGateway installs the Gateway API CRDs, Traefik's ServiceAccount,
// its token and RBAC, the GatewayClass and the Gateway in site's cluster,
// and writes the token where the process reads it.
func (s *Stack) prepareGateway(ctx context.Context, site gatewaySite) error {
	dir := site.dir
	cfg, err := clientcmd.BuildConfigFromFlags("", site.kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	defs, err := crds.DefinitionsIn(os.DirFS(s.gatewayCRDDir()))
	if err != nil || len(defs) == 0 {
		return fmt.Errorf("the Gateway API CRDs in %s (hack/build-tools.sh copies them): %v", s.gatewayCRDDir(), err)
	}
	if err := crds.InstallDefinitions(ctx, dyn, defs); err != nil {
		return fmt.Errorf("install the Gateway API CRDs: %w", err)
	}
	// created is what creating one object left: nil if it exists now.
	created := func(what string) func(any, error) error {
		return func(_ any, err error) error {
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %s: %w", what, err)
			}
			return nil
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: GatewayNamespace}}
	if err := created("namespace " + GatewayNamespace)(cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})); err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: gatewayAccount, Namespace: GatewayNamespace}}
	if err := created("service account")(cs.CoreV1().ServiceAccounts(GatewayNamespace).Create(ctx, sa, metav1.CreateOptions{})); err != nil {
		return err
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "deployflow-gateway-traefik"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces", "services", "secrets", "configmaps", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"*/status"}, Verbs: []string{"get", "update", "patch"}},
	}}
	if err := created("cluster role")(cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})); err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deployflow-gateway-traefik"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: gatewayAccount, Namespace: GatewayNamespace}}}
	if err := created("cluster role binding")(cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})); err != nil {
		return err
	}
	// A long-lived token (the service-account token controller fills
	// it): the stack may run for days.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: gatewayAccount + "-token", Namespace: GatewayNamespace,
		Annotations: map[string]string{corev1.ServiceAccountNameKey: gatewayAccount}}, Type: corev1.SecretTypeServiceAccountToken}
	if err := created("token secret")(cs.CoreV1().Secrets(GatewayNamespace).Create(ctx, secret, metav1.CreateOptions{})); err != nil {
		return err
	}
	var token []byte
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Secrets(GatewayNamespace).Get(ctx, secret.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		token = got.Data[corev1.ServiceAccountTokenKey]
		return len(token) > 0, nil
	}); err != nil {
		return fmt.Errorf("the token of service account %s/%s was never filled: %w", GatewayNamespace, gatewayAccount, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "traefik.yaml"), []byte(s.traefikConfig(site, string(token))), 0o600); err != nil {
		return err
	}

	class := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": GatewayClassName},
		"spec":     map[string]any{"controllerName": GatewayController},
	}}
	if err := created("GatewayClass")(dyn.Resource(GatewayClasses).Create(ctx, class, metav1.CreateOptions{})); err != nil {
		return err
	}
	port, _ := strconv.Atoi(site.port)
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": GatewayName, "namespace": GatewayNamespace},
		"spec": map[string]any{
			"gatewayClassName": GatewayClassName,
			"listeners": []any{map[string]any{
				"name": GatewayListener, "protocol": "HTTP", "port": int64(port),
				"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "All"}},
			}},
		},
	}}
	if err := created("Gateway")(dyn.Resource(Gateways).Namespace(GatewayNamespace).Create(ctx, gw, metav1.CreateOptions{})); err != nil {
		return err
	}
	return nil
}

// traefikConfig is Traefik's static configuration: the Gateway's listener
// and Traefik's own (its /ping) on loopback, the Gateway API provider
// against the stack's API server, no calls home.
func (s *Stack) traefikConfig(site gatewaySite, token string) string {
	return fmt.Sprintf(`entryPoints:
  web: {address: %q}
  traefik: {address: %q}
ping: {entryPoint: traefik}
providers:
  # A route or an EndpointSlice change is served within 100ms of Traefik
  # reading it (its default batches changes for 2s).
  providersThrottleDuration: 100ms
  kubernetesGateway:
    endpoint: "https://127.0.0.1:%s"
    certAuthFilePath: %q
    token: %q
    statusAddress: {ip: "127.0.0.1"}
global: {checkNewVersion: false, sendAnonymousUsage: false}
log: {level: INFO, noColor: true}
`, "127.0.0.1:"+site.port, site.pingAddr, site.apiPort, filepath.Join(s.RunDir, "pki", "ca.crt"), token)
}
