package plan

import (
	"fmt"
	"strconv"
	"time"
)

// Wave is one wave of a placement, as its tree shows it.
type Wave struct {
	Clusters []string
	Pause    time.Duration // 0: none
	Analysis string        // the wave's analysis as the manifest says it; "": none
	Approval bool
}

// Placement is what a placement of lease in waves will do, as a tree: each
// wave's deploys (in parallel), then its gate (pause, analysis, approval).
// `deployflow deploy --plan` prints it; the placement workflow executes it.
func Placement(lease string, waves []Wave) *Node {
	root := New(OpPlacement, lease, fmt.Sprintf("place lease %s in %d waves", lease, len(waves)))
	for i, w := range waves {
		target := WaveTarget(i)
		wave := New(OpWave, target, target)
		for _, c := range w.Clusters {
			wave.Add(New(OpDeployCluster, c, "deploy to cluster "+c))
		}
		if w.Pause > 0 {
			wave.Add(New(OpPause, target, "pause "+w.Pause.String()))
		}
		if w.Analysis != "" {
			wave.Add(New(OpAnalysis, target, "analysis: "+w.Analysis))
		}
		if w.Approval {
			wave.Add(New(OpApproval, target, "wait for approval (deployflow promote "+lease+")"))
		}
		root.Add(wave)
	}
	return root
}

// WaveTarget is the target of wave i's nodes (0-based): "wave <i+1>".
func WaveTarget(i int) string { return "wave " + strconv.Itoa(i+1) }

// Revert is a failed placement's return of cluster to its last-known-good
// manifest, added to the placement's tree when it starts.
func Revert(cluster string) *Node {
	return New(OpRevert, cluster, "return cluster "+cluster+" to its last-known-good manifest")
}
