package rollout

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// routedBlueGreen is a blue-green service's Services and route on the
// fake cluster: what the active and preview Services select, and the
// route's weights, as PinServices and SetTraffic leave them; moves lists
// each SetTraffic call ("active=<v> preview=<v> <w>%").
type routedBlueGreen struct {
	mu              sync.Mutex
	active, preview string
	weight          int32 // the preview's share
	moves           []string
}

func (g *routedBlueGreen) mock(env *testsuite.TestWorkflowEnvironment, versions map[string]string) {
	a := &activities.Activities{}
	name := func(hash string) string {
		if v, ok := versions[hash]; ok {
			return v
		}
		return hash
	}
	env.OnActivity(a.PinServices, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PinInput) (*activities.PinResult, error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			out := &activities.PinResult{Active: g.active, Preview: g.preview}
			switch {
			case in.Unpin:
				g.active, g.preview = "", ""
			default:
				if in.Active != "" {
					g.active = in.Active
				}
				if in.Preview != "" {
					g.preview = in.Preview
				}
			}
			return out, nil
		}).Maybe()
	env.OnActivity(a.SetTraffic, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TrafficInput) (*activities.TrafficResult, error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			if !in.BlueGreen {
				return nil, fmt.Errorf("a blue-green's routes set as a canary's")
			}
			g.active, g.preview, g.weight = in.StableHash, in.CanaryHash, in.CanaryWeight
			g.moves = append(g.moves, fmt.Sprintf("active=%s preview=%s %d%%", name(in.StableHash), name(in.CanaryHash), in.CanaryWeight))
			return &activities.TrafficResult{}, nil
		}).Maybe()
}

// blueGreenThroughRoutes rolls nginx:1.26 out as a blue-green service
// whose hostname is HTTPRoute web-80, then starts nginx:1.27 (promoted
// automatically after 10s, scale-down delay 10 minutes) with control, an update
// sent after delay (none if ""). It returns the route's moves during the
// second rollout, where it left the route, and the rollout's outcome.
func blueGreenThroughRoutes(t *testing.T, control string, delay time.Duration) (moves []string, last string, err error) {
	cluster := newFakeReplicaSets()
	scaleDown := int32(600)
	bg := &manifest.BlueGreen{AutoPromotionSeconds: 10, ScaleDownDelaySeconds: &scaleDown}
	in := func(image string) api.RolloutInput {
		return api.RolloutInput{Namespace: "lease-bg", Service: "web", Deployment: weekDeployment(image), BlueGreen: bg, TrafficRoutes: []string{"web-80"}}
	}
	g := &routedBlueGreen{}
	env, _ := cluster.env(t, time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC), "")
	g.mock(env, nil)
	env.ExecuteWorkflow(RolloutWorkflow, in("nginx:1.26"))
	require.NoError(t, env.GetWorkflowError())
	var v1 api.RolloutResult
	require.NoError(t, env.GetWorkflowResult(&v1))
	old := cluster.rs[v1.NewReplicaSet].Labels[manifest.PodTemplateHashLabel]
	require.Equal(t, []string{fmt.Sprintf("active=%s preview=%s 0%%", old, old)}, g.moves, "a first deploy leaves the route on its version")

	env, _ = cluster.env(t, env.Now(), "")
	g.moves = nil
	versions := map[string]string{old: "old"}
	g.mock(env, versions)
	if control != "" {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(control, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("%s refused: %v", control, err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
			}, api.UndoRequest{})
		}, delay)
	}
	env.ExecuteWorkflow(RolloutWorkflow, in("nginx:1.27"))
	for name, rs := range cluster.rs {
		if name != v1.NewReplicaSet {
			versions[rs.Labels[manifest.PodTemplateHashLabel]] = "new"
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	named := func(m string) string { // once both versions are known
		for hash, v := range versions {
			m = strings.ReplaceAll(m, hash, v)
		}
		return m
	}
	for _, m := range g.moves {
		moves = append(moves, named(m))
	}
	return moves, named(fmt.Sprintf("active=%s preview=%s %d%%", g.active, g.preview, g.weight)), env.GetWorkflowError()
}

// Issue 38.4, a blue-green through a Gateway, decided by the workflow:
// the switch sends every request to the preview Service pinned to the new
// version, then pins the active Service to it and sends them back; an
// undo in the scale-down delay goes back the same way; an abort before
// the switch moves nothing to the preview.
func TestABlueGreensSwitchIsAChangeOfItsRoutes(t *testing.T) {
	t.Run("switch", func(t *testing.T) {
		moves, last, err := blueGreenThroughRoutes(t, "", 0)
		require.NoError(t, err)
		assert.Equal(t, []string{
			"active=old preview=new 100%", // every request to the preview, the new version
			"active=new preview=new 0%",   // the active Service on it too, every request back there
			"active=new preview=new 0%",   // rolled out (the same, asked again: nothing written)
		}, moves)
		assert.Equal(t, "active=new preview=new 0%", last)
	})
	t.Run("undo in the scale-down delay", func(t *testing.T) {
		moves, last, err := blueGreenThroughRoutes(t, api.UpdateUndo, 3*time.Minute)
		require.NoError(t, err, "an undo completes, at the revision it returned to")
		require.GreaterOrEqual(t, len(moves), 4, "%v", moves)
		assert.Equal(t, []string{
			"active=old preview=new 100%",
			"active=new preview=new 0%",
			"active=new preview=old 100%", // back: every request to the preview, pinned to the old version
			"active=old preview=old 0%",   // then the active Service on it, every request back there
		}, moves[:4])
		assert.Equal(t, "active=old preview=old 0%", last)
	})
	t.Run("abort before the switch", func(t *testing.T) {
		moves, last, err := blueGreenThroughRoutes(t, api.UpdateAbort, 2*time.Second)
		require.Error(t, err, "an aborted rollout fails")
		for _, m := range moves {
			assert.NotContains(t, m, "preview=new 100%", "no request ever went to the new version")
		}
		assert.Equal(t, "active=old preview=old 0%", last)
	})
}
