package activities

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	"github.com/deployflow/deployflow/internal/config"
)

// Where a lease's network isolation touches the cluster (issue 35.3): one
// NetworkPolicy per lease namespace, applied with the namespace's profile,
// before its first pod, and brought to the operator's current flags on
// every deploy (--lease-ingress-from, --lease-egress-deny,
// --lease-egress-allow, --lease-dns).

// NamespaceNameLabel is the label the API server sets on every namespace
// to its name: the NetworkPolicy picks namespaces by it.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// applyLeaseNetworkPolicy server-side applies ns's NetworkPolicy.
func (a *Activities) applyLeaseNetworkPolicy(ctx context.Context, ns string, p config.NamespaceProfile, opts metav1.ApplyOptions) error {
	np, err := leaseNetworkPolicy(ns, p)
	if err != nil {
		return err
	}
	if _, err := a.Kube.NetworkingV1().NetworkPolicies(ns).Apply(ctx, np, opts); err != nil {
		return fmt.Errorf("apply networkpolicy %s/%s: %w", ns, ProfileName, err)
	}
	return nil
}

// leaseNetworkPolicy is lease namespace ns's NetworkPolicy under the
// operator's profile p. It selects every pod of the namespace (services and
// analysis Jobs alike) for both directions, so whatever it does not allow
// is denied:
//   - ingress from the namespace's own pods, and from the pods of p's
//     ingress namespaces (ingress controllers, gateways, the worker's);
//   - egress to the namespace's own pods, to the cluster DNS pods on port
//     53, and to any address outside p's denied ranges, which by default
//     hold every private, shared, loopback and link-local range: other
//     leases' pods, the cluster's Services and nodes, Prometheus, Temporal
//     and the worker, and the clouds' metadata endpoints; p's allowed
//     ranges anyway.
func leaseNetworkPolicy(ns string, p config.NamespaceProfile) (*networkingv1ac.NetworkPolicyApplyConfiguration, error) {
	ownPods := networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector())
	ingress := []*networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration{
		networkingv1ac.NetworkPolicyIngressRule().WithFrom(ownPods),
	}
	if from := p.IngressNamespaces(); len(from) > 0 {
		ingress = append(ingress, networkingv1ac.NetworkPolicyIngressRule().WithFrom(
			networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(metav1ac.LabelSelector().WithMatchExpressions(
				metav1ac.LabelSelectorRequirement().WithKey(NamespaceNameLabel).WithOperator(metav1.LabelSelectorOpIn).WithValues(from...)))))
	}

	dnsNS, dnsKey, dnsValue, err := p.DNSPeer()
	if err != nil {
		return nil, invalidInput("%v", err)
	}
	dns := intstr.FromInt32(53)
	egress := []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration{
		networkingv1ac.NetworkPolicyEgressRule().WithTo(ownPods),
		networkingv1ac.NetworkPolicyEgressRule().
			WithTo(networkingv1ac.NetworkPolicyPeer().
				WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{NamespaceNameLabel: dnsNS})).
				WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{dnsKey: dnsValue}))).
			WithPorts(
				networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolUDP).WithPort(dns),
				networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(dns)),
	}
	var v4, v6 []string
	for _, c := range p.EgressDenied() {
		prefix, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, invalidInput("--lease-egress-deny %q: want address ranges such as 10.0.0.0/8", c)
		}
		if prefix.Addr().Is4() {
			v4 = append(v4, prefix.Masked().String())
		} else {
			v6 = append(v6, prefix.Masked().String())
		}
	}
	internet := networkingv1ac.NetworkPolicyEgressRule().WithTo(
		networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR("0.0.0.0/0").WithExcept(v4...)),
		networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR("::/0").WithExcept(v6...)))
	for _, c := range p.EgressAllowed() {
		prefix, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, invalidInput("--lease-egress-allow %q: want address ranges such as 10.1.2.0/24", c)
		}
		internet.WithTo(networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR(prefix.Masked().String())))
	}
	egress = append(egress, internet)

	return networkingv1ac.NetworkPolicy(ProfileName, ns).
		WithLabels(map[string]string{"app.kubernetes.io/managed-by": "deployflow"}).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector()).
			WithPolicyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress).
			WithIngress(ingress...).
			WithEgress(egress...)), nil
}
