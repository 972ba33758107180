package flow

import "go.temporal.io/sdk/workflow"

// Behaviour is how one run's code differs from the current path, decided
// at its start.
type Behaviour struct {
	// batched: the run takes VersionFewerEvents; asked at start, or handed
	// on in the input by a run that took it.
	batched bool
	// TakesHardened: the run takes the manifests sent to it hardened
	// (VersionHardenedPods); a fresh run knows it with batched, a run
	// continued from one that took it from its input.
	TakesHardened bool
}

// NewBehaviour asks VersionFewerEvents, and with it VersionHardenedPods,
// unless inherited says the input was written by a run that took it (no
// marker needed; hardened says whether that run took VersionHardenedPods).
func NewBehaviour(ctx workflow.Context, inherited, hardened bool) Behaviour {
	if inherited {
		return Behaviour{batched: true, TakesHardened: hardened}
	}
	batched, hardened := gateThen(ctx, VersionFewerEvents, VersionHardenedPods)
	return Behaviour{batched: batched, TakesHardened: hardened}
}

// Batches: the run calls the cluster in batched local activities, hands
// that on to its rollouts and continued runs, upserts search attributes
// only when they change, and settles updates only when needed.
func (b *Behaviour) Batches() bool { return b.batched }
