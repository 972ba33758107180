package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/deployflow/deployflow/internal/manifest"
)

// Issue 40 (a fleet's creation): a new lease namespace's default
// ServiceAccount is applied by the deploy's chain, not awaited from
// kube-controller-manager, whose client limit it shares with every pod it
// creates: with 2,000 leases deploying 100 at once, each deploy waited 4
// to 7 s for it. Before, EnsureNamespace watched until the controller made
// it (here, where no controller runs, until its context ended), then
// patched it to mount no token.
func TestALeaseNamespaceNeedNotWaitForKubeControllerManagersServiceAccount(t *testing.T) {
	for _, mount := range []bool{false, true} {
		kc := fake.NewClientset()
		a := &Activities{Kube: kc, LeasesElsewhere: true, MountServiceAccountToken: mount}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := a.EnsureNamespace(ctx, EnsureNamespaceInput{Name: manifest.Namespace("a"), Labels: map[string]string{manifest.LeaseLabel: "a"}})
		cancel()
		require.NoError(t, err, "no controller makes the default ServiceAccount here: the chain does")
		sa, err := kc.CoreV1().ServiceAccounts(manifest.Namespace("a")).Get(context.Background(), "default", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, sa.AutomountServiceAccountToken)
		assert.Equal(t, mount, *sa.AutomountServiceAccountToken, "--mount-service-account-token %t", mount)
	}
}
