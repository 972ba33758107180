package lease

import (
	"testing"

	"github.com/deployflow/deployflow/internal/manifest"
	"github.com/stretchr/testify/assert"
)

// The bound a lease hands each rollout: its total less the other services'.
func TestEachServicesReplicaBoundIsTheLeasesLessTheOthers(t *testing.T) {
	three, ten := int32(3), int32(10)
	m := &manifest.Manifest{Services: []manifest.Service{{Name: "web", Replicas: &three}, {Name: "api", Replicas: &ten}}}
	assert.Equal(t, int32(54), maxReplicasOf(64, m, "web"))
	assert.Equal(t, int32(61), maxReplicasOf(64, m, "api"))
	assert.Equal(t, int32(0), maxReplicasOf(0, m, "web"), "no bound: a plan from before it")
	assert.Equal(t, int32(-1), maxReplicasOf(10, m, "web"), "the others take it all")
}
