package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The manifest page's example (docs/manifest.md, its first YAML block)
// is a manifest this release takes, every field in it known and valid,
// probes included.
func TestTheManifestPagesExampleIsValid(t *testing.T) {
	page, err := os.ReadFile("../../docs/manifest.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(page), "```yaml\n")
	require.True(t, ok, "docs/manifest.md has a YAML example")
	example, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	m, err := Parse([]byte(example))
	require.NoError(t, err)
	require.NoError(t, m.Validate())
	require.NotNil(t, m.Services[0].ReadinessProbe, "the example shows a readiness probe")

	// and every other example on the page too (the GPU one)
	blocks := strings.Split(string(page), "```yaml\n")[1:]
	require.GreaterOrEqual(t, len(blocks), 2)
	for i, b := range blocks {
		example, _, _ := strings.Cut(b, "```")
		m, err := Parse([]byte(example))
		require.NoError(t, err, "YAML block %d", i+1)
		require.NoError(t, m.Validate(), "YAML block %d", i+1)
	}
}

// Every manifest of examples/ is valid: the tour's files deploy as they
// are (the real-shaped app of issue 37 too: probes, a private image,
// secrets, a GPU).
func TestTheExamplesAreValid(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		m, err := Parse(data)
		require.NoError(t, err, f)
		require.NoError(t, m.Validate(), f)
	}
}
