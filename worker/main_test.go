package main_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/worker/testenv"
)

// The worker binary, as a user runs it: against the real Temporal server and
// kube-apiserver, serving Prometheus metrics, and stopping cleanly on SIGTERM.
func TestWorkerBinaryServesMetricsAndStopsOnSIGTERM(t *testing.T) {
	env := testenv.Get(t)
	addr := freeAddr(t)
	w := startWorker(t, env, testenv.Name(t, "tq"), addr)
	cmd, exited, logs := w.cmd, w.exited, w.logs

	base := "http://" + addr
	require.Eventually(t, func() bool { return get(base+"/readyz") == "ok\n" }, 2*time.Minute, 100*time.Millisecond,
		"worker never became ready")
	assert.Equal(t, "ok\n", get(base+"/healthz"))

	// `deployflow-worker healthcheck`, the container's healthcheck.
	check := func(addr string) error {
		hc := exec.Command(workerBinary(t), "healthcheck")
		hc.Env = append(os.Environ(), "DEPLOYFLOW_METRICS_ADDRESS="+addr)
		return hc.Run()
	}
	assert.NoError(t, check(addr), "healthcheck of a ready worker")
	assert.Error(t, check(freeAddr(t)), "healthcheck where no worker serves")

	// SDK metrics are reported once a second; wait for the worker's own.
	var metrics string
	require.Eventually(t, func() bool {
		metrics = get(base + "/metrics")
		return strings.Contains(metrics, "temporal_worker_start") && strings.Contains(metrics, "temporal_poller_start")
	}, 2*time.Minute, 200*time.Millisecond, "no Temporal SDK worker metrics in /metrics")
	for _, want := range []string{
		"# TYPE go_goroutines gauge",           // Go runtime
		"process_resident_memory_bytes",        // process
		`task_queue="`,                         // SDK metrics carry their task queue
		"# TYPE temporal_worker_start counter", // Prometheus text, typed
		"deployflow_build_info{build_id=",      // what runs (issue 9: releases)
		`go_version="go1.`,
	} {
		assert.Contains(t, metrics, want)
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "worker must exit 0 on SIGTERM")
	case <-time.After(time.Minute):
		t.Fatal("worker still running a minute after SIGTERM")
	}
	assert.Contains(t, logs.String(), "worker stopped")
}

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// workerBinary builds deployflow-worker once per test run.
func workerBinary(t *testing.T) string { return workerBinaryWithTags(t, "") }

// workerBinaryWithTags builds deployflow-worker with build tags, once per
// set of tags per test run.
func workerBinaryWithTags(t *testing.T, tags string) string {
	buildMu.Lock()
	defer buildMu.Unlock()
	if path, ok := built[tags]; ok {
		return path
	}
	dir, err := os.MkdirTemp("", "deployflow-worker-test") // outlives the test that builds it
	require.NoError(t, err)
	path := filepath.Join(dir, "deployflow-worker")
	build := exec.Command("go", "build", "-tags", tags, "-o", path, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run(), "build the worker with tags %q", tags)
	built[tags] = path
	return path
}

type workerProcess struct {
	cmd    *exec.Cmd
	exited chan error
	logs   *strings.Builder
}

// startWorker runs the worker binary on the local stack with its own task
// queue and metrics address; it is killed when the test ends.
func startWorker(t *testing.T, env *testenv.Env, taskQueue, metricsAddr string, extra ...string) *workerProcess {
	return startWorkerBinary(t, env, workerBinary(t), taskQueue, metricsAddr, extra...)
}

// startWorkerBinary is startWorker with a given worker binary.
func startWorkerBinary(t *testing.T, env *testenv.Env, bin, taskQueue, metricsAddr string, extra ...string) *workerProcess {
	cmd := exec.Command(bin, append([]string{
		"--temporal-address", devstack.TemporalAddress,
		"--kubeconfig", env.Stack.Kubeconfig(),
		"--task-queue", taskQueue,
		"--metrics-address", metricsAddr,
		"--allow-pod-keys", strings.Join(devstack.KwokKnobs, ","), // as the stack's workers
	}, extra...)...)
	w := &workerProcess{cmd: cmd, exited: make(chan error, 1), logs: &strings.Builder{}}
	cmd.Stdout, cmd.Stderr = w.logs, w.logs
	require.NoError(t, cmd.Start())
	go func() { w.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("worker pid %d output:\n%s", cmd.Process.Pid, w.logs.String())
		}
	})
	return w
}

func get(url string) string {
	resp, err := http.Get(url) //nolint:noctx // test helper on loopback
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

// freeAddr is a loopback address for a worker's --metrics-address
// (devstack.FreeAddr: below the ephemeral range, so no connection takes it
// before the worker binds it).
func freeAddr(t *testing.T) string {
	addr, err := devstack.FreeAddr()
	require.NoError(t, err)
	return addr
}

// Issue 11.5: the concurrency flags reach the SDK worker: its task slots,
// as its own metrics report them, are what the flags say.
func TestWorkerTuningFlagsSetItsTaskSlots(t *testing.T) {
	env := testenv.Get(t)
	addr := freeAddr(t)
	startWorker(t, env, testenv.Name(t, "tq"), addr, "--max-concurrent-activities", "7", "--max-concurrent-workflow-tasks", "5")
	slots := func(workerType string) *regexp.Regexp {
		return regexp.MustCompile(`temporal_worker_task_slots_available\{[^}]*worker_type="` + workerType + `"[^}]*\} (\d+)`)
	}
	require.Eventually(t, func() bool {
		m := get("http://" + addr + "/metrics")
		a, w := slots("ActivityWorker").FindStringSubmatch(m), slots("WorkflowWorker").FindStringSubmatch(m)
		return a != nil && a[1] == "7" && w != nil && w[1] == "5"
	}, 2*time.Minute, 250*time.Millisecond, "task slots: want 7 activity and 5 workflow slots")
}
