package statefulset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Pods are a StatefulSet's pods as a step reads them. A rollout's history
// carries every read (each wait's result), so they are written compactly:
// the revisions once, then one character per ordinal up to the highest,
// for its revision and its Ready, available and terminating flags ("."
// where no pod is). A thousand pods take a kilobyte, not ninety.
type Pods []Pod

// compactPods is Pods as written.
type compactPods struct {
	Revisions []string `json:"revisions"`
	States    string   `json:"states"`
}

// podAlphabet encodes revision index r (0-7) and flags f (0-7) as
// podAlphabet[r*8+f].
const podAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

const (
	flagReady = 1 << iota
	flagAvailable
	flagTerminating
)

// maxCompactRevisions is how many revisions the compact form holds; pods
// of more are written as a plain list.
const maxCompactRevisions = len(podAlphabet) / 8

func (ps Pods) MarshalJSON() ([]byte, error) {
	var revs []string
	high := int32(-1)
	for _, p := range ps {
		if !slices.Contains(revs, p.Revision) {
			revs = append(revs, p.Revision)
		}
		high = max(high, p.Ordinal)
	}
	compact := len(revs) <= maxCompactRevisions && high < 1<<20
	seen := map[int32]bool{}
	for _, p := range ps {
		compact = compact && p.Ordinal >= 0 && !seen[p.Ordinal]
		seen[p.Ordinal] = true
	}
	if !compact {
		return json.Marshal([]Pod(ps))
	}
	slices.Sort(revs)
	states := bytes.Repeat([]byte{'.'}, int(high+1))
	for _, p := range ps {
		f := 0
		if p.Ready {
			f |= flagReady
		}
		if p.Available {
			f |= flagAvailable
		}
		if p.Terminating {
			f |= flagTerminating
		}
		states[p.Ordinal] = podAlphabet[slices.Index(revs, p.Revision)*8+f]
	}
	return json.Marshal(compactPods{Revisions: revs, States: string(states)})
}

func (ps *Pods) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] != '{' {
		return json.Unmarshal(b, (*[]Pod)(ps)) // a plain list (or null)
	}
	var c compactPods
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	*ps = nil
	for ord, ch := range []byte(c.States) {
		if ch == '.' {
			continue
		}
		i := strings.IndexByte(podAlphabet, ch)
		if i < 0 || i/8 >= len(c.Revisions) {
			return fmt.Errorf("pods: state %q of ordinal %d names no revision of %d", ch, ord, len(c.Revisions))
		}
		f := i % 8
		*ps = append(*ps, Pod{Ordinal: int32(ord), Revision: c.Revisions[i/8],
			Ready: f&flagReady != 0, Available: f&flagAvailable != 0, Terminating: f&flagTerminating != 0})
	}
	return nil
}
