package rollout

import (
	"encoding/binary"
	"hash/fnv"
	"strconv"

	"github.com/davecgh/go-spew/spew"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// templatePrinter prints objects the way k8s.io/kubernetes/pkg/util/hash
// DeepHashObject does (via k8s.io/utils/dump.ForHash): pointers followed,
// map keys sorted, no addresses, capacities or Stringer methods. Changing any
// setting changes every pod-template-hash, so it must stay exactly this.
var templatePrinter = &spew.ConfigState{
	Indent:                  " ",
	SortKeys:                true,
	DisableMethods:          true,
	SpewKeys:                true,
	DisablePointerAddresses: true,
	DisableCapacities:       true,
}

// ComputeHash returns the pod-template-hash of template, the value upstream
// puts in the pod-template-hash label and the ReplicaSet name (upstream
// controller.ComputeHash). The template is printed with templatePrinter into
// an FNV-32a hash; a non-nil collisionCount adds 8 bytes (the count as a
// little-endian uint32 followed by 4 zero bytes) so a bumped
// status.collisionCount yields a different name. The decimal sum is then
// mapped onto rand.SafeEncodeString's alphabet.
func ComputeHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	hasher := fnv.New32a()
	templatePrinter.Fprintf(hasher, "%#v", *template)
	if collisionCount != nil {
		var salt [8]byte
		binary.LittleEndian.PutUint32(salt[:4], uint32(*collisionCount))
		hasher.Write(salt[:])
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(hasher.Sum32()), 10))
}
