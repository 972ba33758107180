package rollout

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/deployflow/deployflow/activities"
	"github.com/deployflow/deployflow/workflows/internal/flow"
)

// A canary's traffic by route weight (issue 38.4), where the lease routes
// through a Gateway (in.TrafficRoutes): each setWeight step, once its
// replicas are up, sends its weight of the requests to the canary Service
// (pinned to the new version) and the rest to the stable one (pinned to
// the stable version), and is done only when the Gateway accepted the
// routes for the generation that carries the weight. When the steps are
// done, every request goes to the new version before the old one scales
// down; an abort sends every request back to the stable version before
// anything else; a complete rollout leaves both Services on the version
// it ended on, every request to the stable one. A blue-green's routes
// weigh its active and preview Services the same way, and its switch
// (switchTo) moves them.

// routesTraffic reports whether this rollout's weights are route weights.
func (r *rolloutRun) routesTraffic() bool { return len(r.in.TrafficRoutes) > 0 }

// setTraffic sends weight percent of the routes' requests to version
// canaryHash and the rest to stableHash, and returns once applied (a
// blue-green's: to its preview Service and its active one).
func (r *rolloutRun) setTraffic(stableHash, canaryHash string, weight int32) error {
	return r.setTrafficIn(r.ctx, stableHash, canaryHash, weight)
}

// setTrafficIn is setTraffic in the coroutine of ctx (an update's
// handler has its own).
func (r *rolloutRun) setTrafficIn(ctx workflow.Context, stableHash, canaryHash string, weight int32) error {
	if !r.routesTraffic() {
		return nil
	}
	var a *activities.Activities
	lctx := flow.TrafficCall(ctx, fmt.Sprintf("route %d%% of %s to %s, the rest to %s", weight, r.in.Service, orDash(canaryHash), orDash(stableHash)))
	return workflow.ExecuteLocalActivity(lctx, a.SetTraffic, activities.TrafficInput{
		Namespace: r.in.Namespace, Service: r.in.Service, Routes: r.in.TrafficRoutes,
		StableHash: stableHash, CanaryHash: canaryHash, CanaryWeight: weight, BlueGreen: r.in.BlueGreen != nil,
		ScaledToZero: *r.d.Spec.Replicas == 0,
	}).Get(ctx, nil)
}

// trafficOnAbort sends every request of a canary's routes to the stable
// version, from the abort update's handler (trafficAfterSteps does it
// again once the steps stop, in case a step's write landed after it).
func (r *rolloutRun) trafficOnAbort(ctx workflow.Context) error {
	if r.canary == nil || !r.routesTraffic() {
		return nil
	}
	h := r.stableHash()
	return r.setTrafficIn(ctx, h, h, 0)
}

// trafficAfterSteps is the routes' split once the canary's steps end: on
// an abort, every request to the stable version (otherwise the last step,
// fullWeight, sent every request to the new one). Then the version that
// lost its requests keeps its pods for the scale-down delay, while the
// Gateway's proxies apply the weight they accepted, before the syncs
// scale it down. Once per rollout (carried).
func (r *rolloutRun) trafficAfterSteps() error {
	c := r.canary
	if !r.routesTraffic() || c.TrafficSettled {
		return nil
	}
	if r.outcome != "" {
		h := r.stableHash()
		if err := r.setTraffic(h, h, 0); err != nil {
			return err
		}
	}
	if d := r.in.ScaleDownDelaySeconds; d > 0 {
		r.msg = fmt.Sprintf("every request to %s: the other version keeps its pods for %ds", orDash(r.newHash()), d)
		if err := workflow.Sleep(r.ctx, time.Duration(d)*time.Second); err != nil {
			return err
		}
	}
	c.TrafficSettled = true
	return nil
}

// trafficRolledOut leaves the routes on the version the rollout ended on:
// both Services pinned to it, every request to the stable one (a
// blue-green's active one).
func (r *rolloutRun) trafficRolledOut() error {
	h := r.newHash()
	return r.setTraffic(h, h, 0)
}

// trafficToEveryPod unpins a canary's stable and canary Services: each
// selects every pod of the service while a rollout without steps replaces
// them (a blue-green's are unpinned by startBlueGreen).
func (r *rolloutRun) trafficToEveryPod() error {
	_, err := r.pinServices(activities.PinInput{Unpin: true})
	return err
}
