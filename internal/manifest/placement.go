package manifest

import (
	"regexp"
	"time"
)

// Placement spreads a lease over several clusters in waves (issue 23.2):
// each wave's clusters deploy in parallel, and a wave starts when the one
// before it is healthy in every cluster and its gate (pause, analysis)
// passed. A manifest without placement deploys to the worker's own
// cluster, as ever.
type Placement struct {
	Waves []Wave `json:"waves"`
}

// Wave is one step of a placement.
type Wave struct {
	// Clusters are the worker's clusters this wave deploys to (its
	// --clusters names, or its own cluster's --cluster-name).
	Clusters []string `json:"clusters"`
	// Pause holds the next wave back this long once this one is healthy.
	Pause *WavePause `json:"pause,omitempty"`
	// Analysis is measured once this wave is healthy: the next wave starts
	// only if it passes; if it fails, every cluster that moved returns to
	// the last-known-good manifest. Prometheus only (the worker's, the
	// lease's namespace: the series of every cluster that scrapes into it).
	Analysis *Analysis `json:"analysis,omitempty"`
	// Approval holds the next wave, once this one is healthy and its pause
	// and analysis passed, until an operator promotes the placement
	// (`deployflow promote <lease>`) or aborts it.
	Approval bool `json:"approval,omitempty"`
}

// WavePause is a wave's pause.
type WavePause struct {
	Duration string `json:"duration"` // e.g. "10m"
}

// MaxWavePause is the longest pause a wave may ask for.
const MaxWavePause = 24 * time.Hour

// PauseDuration is the wave's pause, 0 without one.
func (w *Wave) PauseDuration() time.Duration {
	if w.Pause == nil {
		return 0
	}
	d, _ := time.ParseDuration(w.Pause.Duration)
	return d
}

// Clusters lists every cluster of the placement, in wave order.
func (p *Placement) Clusters() []string {
	var out []string
	for _, w := range p.Waves {
		out = append(out, w.Clusters...)
	}
	return out
}

var placementClusterRE = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,18}[a-z0-9])?$`)

// placement checks p's shape; which clusters exist is the worker's to say
// (CheckClusters).
func (v *validator) placement(p *Placement) {
	const path = "placement"
	if len(p.Waves) == 0 {
		v.add(field(path, "waves"), "is empty: list at least one wave, e.g. waves: [{clusters: [staging]}, {clusters: [eu-1]}]")
		return
	}
	seen := map[string]string{}
	for i := range p.Waves {
		w := &p.Waves[i]
		wpath := index(field(path, "waves"), i)
		if len(w.Clusters) == 0 {
			v.add(field(wpath, "clusters"), "is empty: name the clusters this wave deploys to, e.g. clusters: [eu-1]")
		}
		for j, c := range w.Clusters {
			cpath := index(field(wpath, "clusters"), j)
			if !placementClusterRE.MatchString(c) {
				v.add(cpath, "%q is not a cluster name: a lowercase DNS label of at most 20 characters, such as eu-1", c)
				continue
			}
			if first, ok := seen[c]; ok {
				v.add(cpath, "cluster %s is already in %s: a cluster is in one wave only", c, first)
				continue
			}
			seen[c] = cpath
		}
		if w.Pause != nil {
			d, err := time.ParseDuration(w.Pause.Duration)
			switch {
			case err != nil:
				v.add(field(field(wpath, "pause"), "duration"), "%q is not a duration: write one such as 10m or 1h30m", w.Pause.Duration)
			case d <= 0 || d > MaxWavePause:
				v.add(field(field(wpath, "pause"), "duration"), "%s: want more than 0 and at most %s", w.Pause.Duration, MaxWavePause)
			}
		}
		if a := w.Analysis; a != nil {
			apath := field(wpath, "analysis")
			if a.HTTP != nil {
				v.add(field(apath, "http"), "a wave's analysis is a Prometheus query (prometheus: {query: ...}) or a Job run in each of its clusters (job: {image: ...}): an HTTP check reaches the lease's Services of one cluster, inside a service's canary or blue-green")
				continue
			}
			v.analysis(apath, a)
		}
	}
}

// CheckClusters names each cluster of p that is not one of known (the
// worker's clusters), with the field and the fix.
func (p *Placement) CheckClusters(known []string) error {
	var ps problems
	ok := map[string]bool{}
	for _, k := range known {
		ok[k] = true
	}
	for i, w := range p.Waves {
		for j, c := range w.Clusters {
			if !ok[c] {
				ps.add(index(field(index("placement.waves", i), "clusters"), j), "unknown cluster %q: the worker deploys to %v; name one of them, or add the cluster to the worker's --clusters", c, known)
			}
		}
	}
	return ps.err()
}

// WithoutPlacement is m as one cluster deploys it: the same manifest with
// no placement.
func (m *Manifest) WithoutPlacement() *Manifest {
	c := *m
	c.Placement = nil
	return &c
}
