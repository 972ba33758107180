package workflows

import "go.temporal.io/sdk/workflow"

// behaviour is how one run's code differs from the current path, decided
// at its start.
type behaviour struct {
	// batched: the run takes versionFewerEvents; asked at start, or handed
	// on in the input by a run that took it.
	batched bool
	// hardened: the run takes the manifests sent to it hardened
	// (versionHardenedPods); a fresh run knows it with batched, a run
	// continued from one that took it from its input.
	hardened bool
}

// newBehaviour asks versionFewerEvents, and with it versionHardenedPods,
// unless inherited says the input was written by a run that took it (no
// marker needed; hardened says whether that run took versionHardenedPods).
func newBehaviour(ctx workflow.Context, inherited, hardened bool) behaviour {
	if inherited {
		return behaviour{batched: true, hardened: hardened}
	}
	batched, hardened := gateThen(ctx, versionFewerEvents, versionHardenedPods)
	return behaviour{batched: batched, hardened: hardened}
}

// batches: the run calls the cluster in batched local activities, hands
// that on to its rollouts and continued runs, upserts search attributes
// only when they change, and settles updates only when needed.
func (b *behaviour) batches() bool { return b.batched }
