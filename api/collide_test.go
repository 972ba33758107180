package api_test

import (
	"math/rand"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/deployflow/deployflow/api"
	"github.com/deployflow/deployflow/internal/manifest"
)

// Guards issue 8.1: two leases whose lease and service names joined with '-'
// give the same string (lease a / service b-c, lease a-b / service c) shared
// one rollout workflow ID, so the second tenant's deploy failed with "child
// workflow execution already started" and pause/abort reached the other
// tenant's rollout.
func TestRolloutWorkflowIDsOfTheCollidingShapesDiffer(t *testing.T) {
	a := api.RolloutWorkflowID(manifest.Namespace("a"), "b-c")
	b := api.RolloutWorkflowID(manifest.Namespace("a-b"), "c")
	if a == b {
		t.Fatalf("lease a/service b-c and lease a-b/service c share the rollout ID %q", a)
	}
	// The legacy scheme is the one that collided.
	if api.LegacyRolloutWorkflowID(manifest.Namespace("a"), "b-c") != api.LegacyRolloutWorkflowID(manifest.Namespace("a-b"), "c") {
		t.Fatal("the legacy IDs were expected to collide (the defect this guards)")
	}
}

// label draws a valid DNS label from an alphabet rich in '-', so joined
// shapes collide often if the scheme allows it.
func label(r *rand.Rand, max int, firstLetter bool) string {
	const alphabet = "a-b-"
	n := 1 + r.Intn(max)
	var b strings.Builder
	for b.Len() < n {
		b.WriteByte(alphabet[r.Intn(len(alphabet))])
	}
	s := strings.Trim(b.String(), "-0123456789")
	if s == "" {
		s = "a"
	}
	if !firstLetter {
		s = strings.TrimRight(b.String(), "-")
		s = strings.TrimLeft(s, "-")
		if s == "" {
			s = "0"
		}
	}
	return s
}

type leaseService struct{ Lease, Service string }

// Property: the rollout ID of every valid (lease, service) pair parses back
// to that pair, so no two pairs map to one ID; and no rollout ID is a lease
// workflow's ID.
func TestRolloutWorkflowIDIsInjectiveOverValidNames(t *testing.T) {
	seen := map[string]leaseService{}
	check := func(p leaseService) bool {
		if len(validation.IsDNS1123Label(p.Lease)) > 0 || len(validation.IsDNS1035Label(p.Service)) > 0 {
			return true // not a valid pair; the generator rarely makes one
		}
		ns := manifest.Namespace(p.Lease)
		id := api.RolloutWorkflowID(ns, p.Service)
		gotNS, gotSvc, ok := api.ParseRolloutWorkflowID(id)
		if !ok || gotNS != ns || gotSvc != p.Service {
			t.Errorf("%q parses to (%q, %q, %v), want (%q, %q)", id, gotNS, gotSvc, ok, ns, p.Service)
			return false
		}
		if prev, dup := seen[id]; dup && prev != p {
			t.Errorf("%v and %v share the rollout ID %q", prev, p, id)
			return false
		}
		seen[id] = p
		if strings.HasPrefix(id, "deploy-") || id == api.DeployWorkflowID(p.Lease) {
			t.Errorf("rollout ID %q looks like a lease workflow's", id)
			return false
		}
		return true
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		if !check(leaseService{Lease: label(r, 6, false), Service: label(r, 6, true)}) {
			break
		}
	}
	// The generator's shapes do collide under the legacy scheme: the
	// property has teeth.
	legacy := map[string]leaseService{}
	collisions := 0
	for _, p := range seen {
		id := api.LegacyRolloutWorkflowID(manifest.Namespace(p.Lease), p.Service)
		if prev, dup := legacy[id]; dup && prev != p {
			collisions++
		}
		legacy[id] = p
	}
	if collisions == 0 {
		t.Fatal("the generated names never collide under the legacy scheme: the generator is too weak to test injectivity")
	}
}
