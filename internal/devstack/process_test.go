package devstack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testStack(t *testing.T) *Stack {
	dir := t.TempDir()
	return &Stack{RunDir: dir, CacheDir: dir, Logf: t.Logf}
}

func TestStartRecordsPIDAndStopEndsOnlyThatProcess(t *testing.T) {
	s := testStack(t)
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	sleep, _ = filepath.EvalSymlinks(sleep)

	pid, err := s.start(process{name: "sleeper", bin: sleep, args: []string{"60"}})
	require.NoError(t, err)
	got, ok := s.running("sleeper")
	require.True(t, ok)
	assert.Equal(t, pid, got)

	require.NoError(t, s.stop("sleeper", 5*time.Second))
	assert.False(t, alive(pid))
	_, err = os.Stat(s.pidFile("sleeper"))
	assert.True(t, os.IsNotExist(err), "the PID file is removed")
}

func TestRunningRejectsAReusedPID(t *testing.T) {
	s := testStack(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(s.pidFile("x")), 0o755))
	// Our own PID is alive but runs another binary than the one recorded:
	// stop must not kill it.
	me := os.Getpid()
	require.NoError(t, os.WriteFile(s.pidFile("x"), []byte(strconv.Itoa(me)+"\n/usr/bin/not-us\n"), 0o644))
	_, ok := s.running("x")
	assert.False(t, ok)
	require.NoError(t, s.stop("x", time.Second))
	assert.True(t, alive(me))
}

func TestStaleOrMissingPIDFileIsNotRunning(t *testing.T) {
	s := testStack(t)
	_, ok := s.running("absent")
	assert.False(t, ok)
	assert.NoError(t, s.stop("absent", time.Second))
}

func TestReadEnvFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "versions.env")
	require.NoError(t, os.WriteFile(p, []byte("# comment\nA=v1\n\nB = \"v2\"\n"), 0o644))
	m, err := readEnvFile(p)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"A": "v1", "B": "v2"}, m)
}
