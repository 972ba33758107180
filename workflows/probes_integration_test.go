package workflows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/deployflow/deployflow/worker/testenv"
)

// Issue 37.1: a rollout counts what the readiness probe says. A service
// whose new version's readiness probe never passes (here: it probes a port
// the container does not listen on, which the local stack's fake nodes
// fail as a kubelet would) rolls out no further than maxUnavailable lets
// it, the old version still serving, and fails at its progress deadline,
// rolled back to the last-known-good version, which is fully available
// again once its pod taken away has started and passed its probe. Before, a
// manifest could not say when its app was ready: Ready meant "started".
func TestAReadinessProbeThatNeverPassesStopsTheRolloutAndKeepsTheLastGoodVersion(t *testing.T) {
	dt := newDeployTest(t)
	ns := manifest.Namespace(dt.lease)
	replicas, one := int32(3), intstr.FromInt32(1)
	web := func(image string, probePort, deadline int32) manifest.Manifest {
		return manifest.Manifest{Lease: dt.lease, Services: []manifest.Service{{
			Name: "web", Image: image, Replicas: &replicas,
			Ports:          []manifest.Port{{Port: 80}},
			ReadinessProbe: &manifest.Probe{HTTPGet: &manifest.HTTPGetProbe{Path: "/healthz", Port: probePort}, PeriodSeconds: 2},
			Rollout:        &manifest.Rollout{MaxSurge: &one, MaxUnavailable: &one, ProgressDeadlineSeconds: &deadline},
		}}}
	}

	// The probe passes (on the port the app listens on): the deploy
	// succeeds, and its pods carry the probe.
	dt.deploy(web("nginx:1.26", 80, 120))
	st := dt.waitRevision(dt.lease, 1)
	require.Equal(t, api.PhaseActive, st.Phase, st.LastError)
	pods, err := dt.env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: activities.ServiceLabel + "=web"})
	require.NoError(t, err)
	require.NotEmpty(t, pods.Items)
	probe := pods.Items[0].Spec.Containers[0].ReadinessProbe
	require.NotNil(t, probe, "the pod carries the readiness probe")
	assert.Equal(t, "/healthz", probe.HTTPGet.Path)

	// The new version's probe never passes.
	dt.deploy(web("nginx:1.27", 8081, 8))
	lowest, newest := replicas, int32(0)
	testenv.Eventually(t, 3*time.Minute, pollQuery, "deploy 2 never finished", func() (bool, string) {
		_, available, images := dt.available(ns, "web")
		lowest = min(lowest, available)
		newest = max(newest, images["nginx:1.27"])
		s, err := dt.status(dt.lease)
		if err != nil {
			return false, err.Error()
		}
		st = s
		// Deploy 2's record: the lease is Failed while its return to the
		// last-known-good version still runs, and records the deploy once
		// that return has ended (CI run 70 read the record of deploy 1).
		recorded := len(s.History) > 0 && s.History[len(s.History)-1].Revision == 2
		return recorded && s.Phase != api.PhaseDeploying, fmt.Sprintf("revision %d, %s, %d records", s.Revision, s.Phase, len(s.History))
	})
	assert.Equal(t, api.PhaseFailed, st.Phase)
	assert.Contains(t, st.History[len(st.History)-1].Outcome, "ProgressDeadlineExceeded")
	assert.GreaterOrEqual(t, lowest, replicas-1, "the rollout took at most maxUnavailable (1) of the serving pods away")
	assert.Zero(t, newest, "no pod of the new version ever passed its probe")
	// The rollback scaled the last-known-good version back up: its pod
	// taken away starts again, and passes its probe (on a loaded stack,
	// seconds after the deploy's end; CI run 38 read it one pod short).
	testenv.Eventually(t, time.Minute, pollQuery, "the last-known-good version never became fully available again", func() (bool, string) {
		desired, available, images := dt.available(ns, "web")
		return available == replicas && images["nginx:1.26"] == replicas && desired == replicas,
			fmt.Sprintf("desired %d, available %d (%v)", desired, available, images)
	})
}
