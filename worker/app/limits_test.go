package app

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/deployflow/deployflow/internal/config"
)

// Issue 37.3's review: a worker with the codec's keys keeps secrets for a
// placement's waves too. Before, the placement's check of a manifest had
// the lease limits alone and refused one with secrets that the lease's own
// deploy took.
func TestThePlacementsLimitsKeepSecretsWithTheCodecsKeys(t *testing.T) {
	cfg := config.FromEnv()
	cfg.CodecKeysFile = "/etc/deployflow/codec/keys.json"
	assert.True(t, Fleet(cfg, nil).Limits.Secrets)
	cfg.CodecKeysFile = ""
	assert.False(t, Fleet(cfg, nil).Limits.Secrets)
}
