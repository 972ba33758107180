package devstack

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testStack(t *testing.T) *Stack {
	dir := t.TempDir()
	return &Stack{RunDir: dir, CacheDir: dir, Logf: t.Logf}
}

// startSleeper starts "sleeper", sleep 60, on s: its binary and PID.
func startSleeper(t *testing.T, s *Stack) (string, int) {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	sleep, _ = filepath.EvalSymlinks(sleep)
	pid, err := s.start(process{name: "sleeper", bin: sleep, args: []string{"60"}})
	require.NoError(t, err)
	return sleep, pid
}

func TestStartRecordsPIDAndStopEndsOnlyThatProcess(t *testing.T) {
	s := testStack(t)
	_, pid := startSleeper(t, s)
	got, ok := s.running("sleeper")
	require.True(t, ok)
	assert.Equal(t, pid, got)

	require.NoError(t, s.stop("sleeper", 5*time.Second))
	assert.False(t, alive(pid))
	_, err := os.Stat(s.pidFile("sleeper"))
	assert.True(t, os.IsNotExist(err), "the PID file is removed")
}

// Guards a component's CPU priority: started by a test at a lower one
// (make test runs its tests at nice 10), it runs at the default, as the
// stack's own servers do (an extra cluster's API server, started by a test
// and starved, was not ready within a minute: local CI run 97).
func TestAComponentStartedFromALowerPriorityRunsAtTheDefault(t *testing.T) {
	// The priority is the thread's: this goroutine keeps its thread, which
	// ends with it (never unlocked), so no other goroutine runs lower.
	runtime.LockOSThread()
	// Five lower, within the lowest (19): run under nice 19, the test
	// itself asked for 24 and failed before it started anything.
	lower := min(niceness()+5, 19)
	require.NoError(t, syscall.Setpriority(syscall.PRIO_PROCESS, 0, lower))
	require.Equal(t, lower, niceness())

	s := testStack(t)
	sleep, pid := startSleeper(t, s)
	t.Cleanup(func() { _ = s.stop("sleeper", time.Second) })
	_, ok := s.running("sleeper")
	assert.True(t, ok, "running while nice starts it, and after")
	require.Eventually(t, func() bool {
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
		return exe == sleep
	}, 10*time.Second, 10*time.Millisecond, "nice runs the component under its PID")
	_, ok = s.running("sleeper")
	assert.True(t, ok)

	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	fields := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
	nice, err := strconv.Atoi(fields[16]) // field 19 of proc(5), the 17th after the name
	require.NoError(t, err)
	if os.Geteuid() != 0 {
		t.Logf("not root: the component stays at nice %d (nice says so in its log)", nice)
		assert.Equal(t, lower, nice)
		return
	}
	assert.Equal(t, 0, nice, "the component runs at the default priority")
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

// Guards the local control plane against a component that exits on its own:
// kube-scheduler exits when it finds its cache corrupted, which a
// kube-apiserver outage during StatefulSet rollouts caused (make chaos), and
// nothing scheduled a pod again. A restart process is started again, as a
// kubelet restarts a static pod; stop (SIGTERM) and Kill (SIGKILL) end the
// supervisor and the process together.
func TestARestartProcessIsStartedAgainAndStopsWithItsSupervisor(t *testing.T) {
	for _, grace := range []time.Duration{5 * time.Second, 0} {
		t.Run("grace "+grace.String(), func(t *testing.T) {
			s := testStack(t)
			dir := t.TempDir()
			starts := filepath.Join(dir, "starts")
			// The first run exits with status 3; the next one stays up.
			script := filepath.Join(dir, "component")
			require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
n=$(cat "`+starts+`" 2>/dev/null | wc -l)
echo $$ >> "`+starts+`"
[ "$n" -ge 1 ] && exec sleep 60
exit 3
`), 0o755))

			supervisor, err := s.start(process{name: "component", bin: script, restart: true})
			require.NoError(t, err)
			_, ok := s.running("component")
			require.True(t, ok, "the supervisor is what the PID file records")

			var pids []int
			require.Eventually(t, func() bool {
				b, _ := os.ReadFile(starts)
				pids = nil
				for _, f := range strings.Fields(string(b)) {
					pid, _ := strconv.Atoi(f)
					pids = append(pids, pid)
				}
				return len(pids) == 2
			}, 10*time.Second, 50*time.Millisecond, "the process is started again after it exits")
			assert.True(t, alive(pids[1]))
			log, _ := os.ReadFile(s.logFile("component"))
			assert.Contains(t, string(log), "exited (status 3); restarting in 1s")

			require.NoError(t, s.stop("component", grace))
			assert.False(t, alive(supervisor), "the supervisor is stopped")
			assert.False(t, alive(pids[1]), "its process is stopped with it")
			assert.False(t, groupAlive(supervisor))
		})
	}
}
