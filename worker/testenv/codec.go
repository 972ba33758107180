package testenv

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/deployflow/deployflow/internal/codec"
	"github.com/deployflow/deployflow/internal/devstack"
)

// CodecEnv is the local stack with a Temporal client that encrypts what
// it writes (internal/codec), as a worker and a CLI with
// --codec-keys-file do: its workers (Worker, WorkerWith) use that client,
// and log, at debug level, into Log. The Env's own Temporal client stays
// raw: what it reads is what Temporal stores.
type CodecEnv struct {
	*Env
	// Raw is the stack's client without the codec.
	Raw client.Client
	// KeysFile is the keys file (for a CLI's --codec-keys-file); Codec is
	// its codec.
	KeysFile string
	Codec    *codec.Codec
	// Log is what the codec client's workers logged.
	Log *SyncBuffer
}

// WithCodec is e with a fresh keys file and a client encrypting with it,
// closed when the test ends. Its workers' histories are not recorded for
// the replay suite (the replayer holds no key).
func (e *Env) WithCodec(t testing.TB) *CodecEnv {
	t.Helper()
	keys, err := codec.NewKey("test")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "codec-keys.json")
	if err := os.WriteFile(file, keys, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := codec.LoadKeys(file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.New(k)
	if err != nil {
		t.Fatal(err)
	}
	log := &SyncBuffer{}
	opts := client.Options{
		HostPort:  devstack.TemporalAddress,
		Namespace: e.TemporalNamespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))),
	}
	c.Apply(&opts)
	tc, err := client.DialContext(context.Background(), opts)
	if err != nil {
		t.Fatalf("dial Temporal with the codec: %v", err)
	}
	t.Cleanup(tc.Close)
	withCodec := *e
	withCodec.Temporal = tc
	withCodec.noRecord = true
	withCodec.dc = opts.DataConverter
	return &CodecEnv{Env: &withCodec, Raw: e.Temporal, KeysFile: file, Codec: c, Log: log}
}
