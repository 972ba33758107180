// Package canary is the arithmetic of a canary rollout without a traffic
// router (issue 12.2): a step's weight is the share of a service's replicas
// that run the new version, and each sync moves the stable and canary
// ReplicaSets toward that split within maxSurge and maxUnavailable, as a
// RollingUpdate moves old and new. Pure: no I/O, tested with tables.
//
// The semantics follow Argo Rollouts' basic canary (setWeight without
// traffic routing); the code is deployflow's own.
package canary

// Split is a desired number of replicas on each version.
type Split struct {
	Canary int32
	Stable int32
}

// SplitFor is the split closest to weight percent of replicas on the
// canary. Between 0 and 100 neither side is rounded away to zero (a canary
// at 1% of 10 replicas runs 1 pod), unless one replica and no surge leave
// no room for both. With maxSurge > 0 the split may run one replica more
// than desired when that share is closer (3 replicas at 50% run 2 and 2).
// Ties prefer the desired total, then the larger canary.
func SplitFor(replicas, weight, maxSurge int32) Split {
	switch {
	case replicas <= 0:
		return Split{}
	case weight <= 0:
		return Split{Stable: replicas}
	case weight >= 100:
		return Split{Canary: replicas}
	}
	totals := []int32{replicas}
	if maxSurge > 0 {
		totals = append(totals, replicas+1)
	}
	floor := replicas * weight / 100
	ceil := floor
	if replicas*weight%100 != 0 {
		ceil++
	}
	best, bestOff := Split{}, int64(-1)
	for _, total := range totals {
		for _, c := range []int32{ceil, floor} {
			if c < 1 || c > total-1 {
				continue // both versions run while the weight is strictly between 0 and 100
			}
			// |c/total - weight/100|, compared exactly: |100c - weight*total| / total.
			off := abs64(100*int64(c)-int64(weight)*int64(total)) * 100000 / int64(total)
			if bestOff < 0 || off < bestOff {
				best, bestOff = Split{Canary: c, Stable: total - c}, off
			}
		}
	}
	if bestOff < 0 { // one replica, no surge: it runs the version the weight leans to
		if weight >= 50 {
			return Split{Canary: replicas}
		}
		return Split{Stable: replicas}
	}
	return best
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// ReplicaSet is what a sync reads of one side: its spec.replicas and its
// available replicas.
type ReplicaSet struct {
	Replicas  int32
	Available int32
}

// Step is one sync's scaling toward a Split: the new spec.replicas of the
// canary and stable ReplicaSets.
//
// The side that grows grows first, within maxSurge (the pods of both sides
// never exceed replicas + maxSurge); the stable side gets the surge first,
// so an abort brings stable pods up before it takes canary pods away. The
// side that shrinks shrinks only by what the available pods of both sides
// can spare above replicas - maxUnavailable: a canary step never has fewer
// available pods than a RollingUpdate would allow.
func Step(replicas, maxSurge, maxUnavailable int32, canary, stable ReplicaSet, want Split) Split {
	next := Split{Canary: canary.Replicas, Stable: stable.Replicas}
	room := replicas + maxSurge - canary.Replicas - stable.Replicas
	if next.Stable < want.Stable && room > 0 {
		up := min(want.Stable-next.Stable, room)
		next.Stable += up
		room -= up
	}
	if next.Canary < want.Canary && room > 0 {
		next.Canary += min(want.Canary-next.Canary, room)
	}
	// Unavailable pods go first (the ReplicaSet controller deletes them
	// first) and cost no availability; available ones only as spare allows.
	spare := canary.Available + stable.Available - (replicas - maxUnavailable)
	shrink := func(spec *int32, side ReplicaSet, target int32) {
		if *spec <= target {
			return
		}
		unavailable := max(side.Replicas-side.Available, 0)
		down := min(*spec-target, unavailable+max(spare, 0))
		*spec -= down
		spare -= max(down-unavailable, 0)
	}
	shrink(&next.Canary, canary, want.Canary)
	shrink(&next.Stable, stable, want.Stable)
	return next
}

// ScaleFor is a setCanaryScale step's split: replicas pods on the canary
// (or weight percent of the service's replicas, rounded up so a positive
// weight runs a pod), capped at the service's replicas, and the rest on the
// stable version. Set by count, so no share is chased with the surge.
func ScaleFor(replicas int32, count, weight *int32) Split {
	var c int32
	switch {
	case count != nil:
		c = *count
	case weight != nil:
		c = (replicas**weight + 99) / 100
	}
	c = max(0, min(c, replicas))
	return Split{Canary: c, Stable: replicas - c}
}

// Counted is rs as Step should count it: no more available pods than its
// replicas. A ReplicaSet's status not yet updated after a scale-down still
// counts the pods on their way out; counted as available, they would be
// spent a second time.
func Counted(rs ReplicaSet) ReplicaSet {
	rs.Available = min(rs.Available, rs.Replicas)
	return rs
}
