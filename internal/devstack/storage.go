package devstack

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Storage (issue 39.4): every cluster of the stack binds claims of its
// StorageClass, StorageClass. Its provisioner is the controller-manager's
// own hostPath provisioner (--enable-hostpath-provisioner: one directory
// under /tmp/hostpath_pv per claim, deleted with its volume), its binding
// Immediate: a claim is Bound as soon as it is made, and the scheduler
// places its pods on any fake node. The controller-manager also runs the
// StatefulSet controller and the claims' and volumes' protection, so a
// StatefulSet's volumeClaimTemplates behave as in a real cluster: a claim
// per ordinal, kept when its pod is replaced.

// StorageClass is the stack's StorageClass.
const StorageClass = "deployflow-local"

// hostPathProvisioner is the controller-manager's hostPath provisioner.
const hostPathProvisioner = "kubernetes.io/host-path"

// ensureStorageClass creates the stack's StorageClass in the cluster of
// cs, if it has none of that name.
func ensureStorageClass(ctx context.Context, cs kubernetes.Interface) error {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClass, Labels: map[string]string{"app.kubernetes.io/managed-by": "devstack"}},
		Provisioner:       hostPathProvisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("StorageClass %s: %w", StorageClass, err)
	}
	return nil
}
