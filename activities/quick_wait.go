package activities

import (
	"context"
	"reflect"
	"time"
)

// The quick wait: a rollout's first wait in a workflow task, run as a local
// activity of a few seconds (workflows/rollout/calls.go). Pods that become
// ready within it let the rollout decide again, or finish, in the task that
// applied the change: no activity, no second workflow task (six history
// events fewer). A wait that outlasts it hands over to WaitForChange.

// QuickWait is WaitForChange from in.Seen, the state the workflow decided
// on, for at most in.Timeout, with one difference: pods created but not
// yet ready (a ReplicaSet's status.replicas or its active pods growing,
// nothing else changed) do not end it. Upstream's controller syncs on that
// change too, but only to stamp progress; the state returned carries
// ObservedAt, when the change was seen, so the rollout's sync stamps the
// same time. Everything else a decision reads (readiness, availability,
// pods gone, spec, annotations, conditions) ends the wait at once.
//
// A quick wait holds its rollout's workflow task (and one of the worker's
// workflow-task slots) while it waits, so at most MaxQuickWaits run at once
// in a worker: beyond that (a fleet of deploys, whose pods are not ready
// within seconds anyway) it returns at once the state seen, without
// ObservedAt, and the rollout waits in an activity as before.
func (a *Activities) QuickWait(ctx context.Context, in WaitForChangeInput) (*RolloutState, error) {
	if in.Seen == nil {
		return nil, invalidInput("quickWait: the state the workflow decided on (seen) is missing")
	}
	select {
	case quickWaits <- struct{}{}:
		defer func() { <-quickWaits }()
	default:
		seen := *in.Seen
		seen.ObservedAt = nil
		return &seen, nil
	}
	in.Digest = in.Seen.Digest
	in.folds = &folds{}
	st, err := a.WaitForChange(ctx, in)
	if err != nil {
		return nil, err
	}
	at := in.folds.seenAt(st.Digest)
	st.ObservedAt = &at
	return st, nil
}

// MaxQuickWaits is how many quick waits a worker runs at once.
const MaxQuickWaits = 32

var quickWaits = make(chan struct{}, MaxQuickWaits)

// folds records the changes a quick wait let pass (pods created, not yet
// ready) and when each was first seen. Only the wait's own goroutine
// touches it.
type folds struct {
	digest string
	at     time.Time
}

func (f *folds) fold(digest string) {
	if f.digest != digest {
		f.digest, f.at = digest, time.Now()
	}
}

// seenAt is when the state with digest was first seen: when it was folded,
// or now.
func (f *folds) seenAt(digest string) time.Time {
	if f.digest == digest && !f.at.IsZero() {
		return f.at
	}
	return time.Now()
}

// wakes reports whether st ends the wait: it differs from what the workflow
// decided on and, for a quick wait, by more than pods created.
func (in WaitForChangeInput) wakes(st *RolloutState) bool {
	if st.Digest == in.Digest {
		return false
	}
	if in.folds == nil || in.Seen == nil || !onlyPodsCreated(in.Seen, st) {
		return true
	}
	in.folds.fold(st.Digest)
	return false
}

// onlyPodsCreated reports whether now differs from seen only by pods
// created: some ReplicaSets' status.replicas, or their active pods, grew
// while their ready and available counts stayed, and nothing else a
// decision reads changed.
func onlyPodsCreated(seen, now *RolloutState) bool {
	before, after := factsOf(seen), factsOf(now)
	if len(before.RS) != len(after.RS) {
		return false
	}
	for i := range after.RS {
		b, a := before.RS[i], after.RS[i]
		if a.Status[0] > b.Status[0] {
			a.Status[0] = b.Status[0]
		}
		if !reflect.DeepEqual(a, b) {
			return false
		}
	}
	for uid, n := range before.Pods {
		if after.Pods[uid] < n {
			return false
		}
	}
	return true
}
