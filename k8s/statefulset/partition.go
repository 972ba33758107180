// Package statefulset is the arithmetic of a StatefulSet rollout driven
// through its partition (issue 39.2): pure functions, no I/O, no Temporal,
// tested with tables.
//
// The StatefulSet controller (k8s.io/kubernetes v1.36.3
// pkg/controller/statefulset) replaces the pods of a RollingUpdate from the
// highest ordinal down, and keeps every pod whose ordinal is below
// spec.updateStrategy.rollingUpdate.partition at the current revision. A
// StatefulSet whose partition equals its replicas therefore replaces no
// pod when its template changes: deployflow applies a new template that
// way, then lowers the partition itself, a step at a time, each step
// waiting until the pods it released run the update revision and are
// available. A step is a durable boundary of the rollout's workflow; a
// canary step is a partition short of zero; an abort writes the previous
// template back and the same steps return the updated ordinals to it.
//
// The code is deployflow's own; the semantics are upstream's.
package statefulset

import (
	"fmt"
	"slices"
)

// Pod is what a step reads of one pod of the StatefulSet.
type Pod struct {
	Ordinal int32
	// Revision is the pod's controller-revision-hash label: the
	// ControllerRevision its template came from.
	Revision string
	// Ready is the pod's Ready condition; Available is Ready for the
	// StatefulSet's minReadySeconds.
	Ready, Available bool
	// Terminating: its deletion has begun (the controller replaces it).
	Terminating bool
}

// Observed is the StatefulSet as a step reads it: its spec's replicas and
// partition, its status's update revision (read once the status has
// observed the spec's generation), and its pods.
type Observed struct {
	Name           string
	Replicas       int32
	Partition      int32
	UpdateRevision string
	// CurrentRevision is the status's current revision: the one a pod
	// below the partition is made at.
	CurrentRevision string `json:"currentRevision,omitempty"`
	Pods            Pods
}

// Step is what the rollout does next.
type Step struct {
	// Partition is the partition to write; equal to the observed one,
	// nothing is written.
	Partition int32
	// Reached: every ordinal at or above the target partition runs the
	// update revision and is available. With a target of 0, the rollout
	// is complete.
	Reached bool
	// Waiting says what the step waits for (the highest ordinal not yet
	// there), for the rollout's status; "" once reached.
	Waiting string
	// Updated counts the ordinals that run the update revision and are
	// available: what the progress deadline measures progress by.
	Updated int32
}

// Next decides the next step of o's rollout down to partition target:
// while the ordinals the partition released (those at or above it) all
// run the update revision and are available, the partition goes down by
// up to maxUnavailable (at least 1), never below target; otherwise it
// stays, and Waiting names the highest ordinal not there yet. target above
// the replicas is the replicas (no ordinal released).
func Next(o Observed, target, maxUnavailable int32) Step {
	target = clamp(target, 0, o.Replicas)
	partition := clamp(o.Partition, 0, o.Replicas)
	maxUnavailable = max(maxUnavailable, 1)
	byOrdinal := map[int32]Pod{}
	for _, p := range o.Pods {
		byOrdinal[p.Ordinal] = p
	}
	var s Step
	for ord := o.Replicas - 1; ord >= 0; ord-- {
		if ready(byOrdinal, ord, o.UpdateRevision) == "" {
			s.Updated++
		}
	}
	if s.Updated == o.Replicas {
		// Every pod runs the update revision already (a StatefulSet just
		// created, a template returned to what runs): no step to wait for.
		s.Partition, s.Reached = target, true
		return s
	}
	// The released ordinals, highest first: the first one not there is
	// what the step waits for.
	for ord := o.Replicas - 1; ord >= partition; ord-- {
		if why := ready(byOrdinal, ord, o.UpdateRevision); why != "" {
			s.Partition, s.Waiting = partition, fmt.Sprintf("%s-%d %s", o.Name, ord, why)
			return s
		}
	}
	if partition > target {
		// Release the next ordinals; the step is reached once they are there.
		s.Partition = max(partition-maxUnavailable, target)
		s.Waiting = fmt.Sprintf("%s-%d to run the update revision", o.Name, s.Partition)
		return s
	}
	s.Partition, s.Reached = partition, true
	return s
}

// ready says why ordinal ord is not yet an available pod of revision rev,
// or "".
func ready(pods map[int32]Pod, ord int32, rev string) string {
	p, ok := pods[ord]
	switch {
	case !ok:
		return "to be created"
	case p.Terminating:
		return "to be replaced"
	case p.Revision != rev:
		return "to be replaced by the update revision"
	case !p.Ready:
		return "to turn Ready"
	case !p.Available:
		return "to be Ready for minReadySeconds"
	}
	return ""
}

// PartitionFor is the partition that releases weight percent of replicas
// (rounded up, as a canary's share of pods is): 0 at 100, replicas at 0.
func PartitionFor(weight, replicas int32) int32 {
	weight = clamp(weight, 0, 100)
	released := (int64(weight)*int64(replicas) + 99) / 100
	return replicas - int32(released)
}

// ForcedRollback decides a return's forced rollback: the pods of another
// revision than o's update revision that never turned Ready, to delete
// (highest first), and the partition to write first so that each comes
// back at the update revision. The controller replaces a rolling update's
// pods one at a time and waits for each to be Ready first, and with
// OrderedReady one pod not Ready holds every replacement, so a version
// whose pods never start would hold the way back (upstream documents
// deleting such pods by hand as the "forced rollback"); deployflow does it.
//
// A pod deleted below the partition is made again at the current
// revision. That is the update revision after an abort mid-rollout (the
// pods below the partition never left it), and then the partition stays;
// but after a rollout that completed, the current revision is the failed
// one, and the pod would come back failed: the partition is first lowered
// to the lowest such ordinal, releasing it to the update revision.
func ForcedRollback(o Observed) (partition int32, del []int32) {
	partition = o.Partition
	for _, p := range o.Pods {
		if p.Revision == o.UpdateRevision || p.Ready || p.Terminating {
			continue
		}
		del = append(del, p.Ordinal)
		if p.Ordinal < partition && o.CurrentRevision != o.UpdateRevision {
			partition = p.Ordinal
		}
	}
	slices.Sort(del)
	slices.Reverse(del)
	return partition, del
}

func clamp(v, lo, hi int32) int32 { return min(max(v, lo), hi) }
