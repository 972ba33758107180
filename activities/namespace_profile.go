package activities

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Where a lease namespace's profile touches the cluster (issue 20.4): what
// one tenant's pods may take and do, whatever its manifest says. The
// operator sets it (--pod-security, --lease-quota-*, --lease-default-*).

// PodSecurityEnforceLabel is Pod Security Admission's enforce label.
const PodSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"

// ProfileName names the ResourceQuota and the LimitRange of a lease
// namespace.
const ProfileName = "deployflow-lease"

// profile is the operator's namespace profile, unset fields at their
// defaults.
func (a *Activities) profile() config.NamespaceProfile {
	p, d := a.Namespace, config.DefaultNamespaceProfile()
	for _, f := range []struct {
		v   *string
		def string
	}{
		{&p.PodSecurity, d.PodSecurity}, {&p.QuotaCPU, d.QuotaCPU}, {&p.QuotaMemory, d.QuotaMemory}, {&p.QuotaPods, d.QuotaPods},
		{&p.QuotaEphemeralStorage, d.QuotaEphemeralStorage}, {&p.QuotaNodePorts, d.QuotaNodePorts},
		{&p.QuotaLoadBalancers, d.QuotaLoadBalancers}, {&p.QuotaJobs, d.QuotaJobs},
		{&p.QuotaServices, d.QuotaServices}, {&p.QuotaReplicaSets, d.QuotaReplicaSets}, {&p.QuotaGPUs, d.QuotaGPUs},
		{&p.QuotaStorage, d.QuotaStorage}, {&p.QuotaClaims, d.QuotaClaims},
		{&p.DefaultLimitEphemeralStorage, d.DefaultLimitEphemeralStorage},
		{&p.DefaultRequestCPU, d.DefaultRequestCPU}, {&p.DefaultRequestMemory, d.DefaultRequestMemory},
		{&p.DefaultLimitCPU, d.DefaultLimitCPU}, {&p.DefaultLimitMemory, d.DefaultLimitMemory},
		{&p.IngressFrom, d.IngressFrom}, {&p.EgressDeny, d.EgressDeny}, {&p.DNS, d.DNS},
	} {
		if *f.v == "" {
			*f.v = f.def
		}
	}
	return p
}

// applyLeaseProfile makes lease namespace ns enforce the operator's
// profile: its Pod Security level (a label, set on ns if it differs), a
// ResourceQuota, a LimitRange and a NetworkPolicy (namespace_network.go)
// (server-side applied: idempotent, and
// brought to the operator's current profile on every deploy).
func (a *Activities) applyLeaseProfile(ctx context.Context, ns *corev1.Namespace) error {
	p := a.profile()
	if ns.Labels[PodSecurityEnforceLabel] != p.PodSecurity {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[PodSecurityEnforceLabel] = p.PodSecurity
		if _, err := a.Kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("label namespace %s with pod security %s: %w", ns.Name, p.PodSecurity, err)
		}
	}
	q := func(s string) resource.Quantity { return resource.MustParse(s) } // validated by config
	hard := corev1.ResourceList{
		corev1.ResourceRequestsCPU: q(p.QuotaCPU), corev1.ResourceLimitsCPU: q(p.QuotaCPU),
		corev1.ResourceRequestsMemory: q(p.QuotaMemory), corev1.ResourceLimitsMemory: q(p.QuotaMemory),
		corev1.ResourcePods:                     q(p.QuotaPods),
		corev1.ResourceLimitsEphemeralStorage:   q(p.QuotaEphemeralStorage),
		corev1.ResourceRequestsEphemeralStorage: q(p.QuotaEphemeralStorage),
		corev1.ResourceServicesNodePorts:        q(p.QuotaNodePorts),
		corev1.ResourceServicesLoadBalancers:    q(p.QuotaLoadBalancers),
		"count/jobs.batch":                      q(p.QuotaJobs),
		corev1.ResourceServices:                 q(p.QuotaServices),
		"count/replicasets.apps":                q(p.QuotaReplicaSets),
	}
	// GPUs: the operator's quota where it offers any, none elsewhere (an
	// extended resource's quota is on its requests).
	gpus := p.QuotaGPUs
	if len(a.Limits.GPUModels) == 0 {
		gpus = "0"
	}
	for _, r := range manifest.GPUVendors {
		hard[corev1.ResourceName("requests."+string(r))] = q(gpus)
	}
	// Persistent storage likewise (issue 39.1): the operator's quota where
	// it offers storage classes, none elsewhere.
	storage, claims := p.QuotaStorage, p.QuotaClaims
	if len(a.Limits.StorageClasses) == 0 {
		storage, claims = "0", "0"
	}
	hard[corev1.ResourceRequestsStorage], hard[corev1.ResourcePersistentVolumeClaims] = q(storage), q(claims)
	quota := corev1ac.ResourceQuota(ProfileName, ns.Name).
		WithLabels(map[string]string{"app.kubernetes.io/managed-by": "deployflow"}).
		WithSpec(corev1ac.ResourceQuotaSpec().WithHard(hard))
	force := true
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: force}
	if _, err := a.Kube.CoreV1().ResourceQuotas(ns.Name).Apply(ctx, quota, opts); err != nil {
		return fmt.Errorf("apply resourcequota %s/%s: %w", ns.Name, ProfileName, err)
	}
	limits := corev1ac.LimitRange(ProfileName, ns.Name).
		WithLabels(map[string]string{"app.kubernetes.io/managed-by": "deployflow"}).
		WithSpec(corev1ac.LimitRangeSpec().WithLimits(corev1ac.LimitRangeItem().
			WithType(corev1.LimitTypeContainer).
			// No disk request (a LimitRange would copy the limit): the
			// scheduler places pods as before, the quota and the kubelet
			// bound what they write.
			WithDefaultRequest(corev1.ResourceList{corev1.ResourceCPU: q(p.DefaultRequestCPU), corev1.ResourceMemory: q(p.DefaultRequestMemory),
				corev1.ResourceEphemeralStorage: resource.MustParse("0")}).
			WithDefault(corev1.ResourceList{corev1.ResourceCPU: q(p.DefaultLimitCPU), corev1.ResourceMemory: q(p.DefaultLimitMemory),
				corev1.ResourceEphemeralStorage: q(p.DefaultLimitEphemeralStorage)})))
	if _, err := a.Kube.CoreV1().LimitRanges(ns.Name).Apply(ctx, limits, opts); err != nil {
		return fmt.Errorf("apply limitrange %s/%s: %w", ns.Name, ProfileName, err)
	}
	return a.applyLeaseNetworkPolicy(ctx, ns.Name, p, opts)
}

// keepTokenUnmounted makes a lease namespace's default ServiceAccount mount
// no API token into pods (automountServiceAccountToken: false) unless the
// operator allows it (--mount-service-account-token): a tenant's pods
// need no credentials for the cluster. Pods inherit it (a manifest cannot
// set the pod's own field), so no pod template changes.
func (a *Activities) keepTokenUnmounted(ctx context.Context, sa *corev1.ServiceAccount) error {
	want := a.MountServiceAccountToken
	if sa.AutomountServiceAccountToken != nil && *sa.AutomountServiceAccountToken == want {
		return nil
	}
	patch := fmt.Appendf(nil, `{"automountServiceAccountToken": %t}`, want)
	if _, err := a.Kube.CoreV1().ServiceAccounts(sa.Namespace).Patch(ctx, sa.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("set automountServiceAccountToken of serviceaccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return nil
}
