package main_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/testenv"
)

// The worker binary, as a user runs it: against the real Temporal server and
// kube-apiserver, serving Prometheus metrics, and stopping cleanly on SIGTERM.
func TestWorkerBinaryServesMetricsAndStopsOnSIGTERM(t *testing.T) {
	env := testenv.Get(t)
	bin := filepath.Join(t.TempDir(), "deployflow-worker")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	addr := freeAddr(t)
	cmd := exec.Command(bin,
		"--temporal-address", devstack.TemporalAddress,
		"--kubeconfig", env.Stack.Kubeconfig(),
		"--task-queue", testenv.Name(t, "tq"),
		"--metrics-address", addr,
	)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("worker output:\n%s", logs.String())
		}
	})

	base := "http://" + addr
	require.Eventually(t, func() bool { return get(base+"/readyz") == "ok\n" }, 30*time.Second, 100*time.Millisecond,
		"worker never became ready")
	assert.Equal(t, "ok\n", get(base+"/healthz"))

	// SDK metrics are reported once a second; wait for the worker's own.
	var metrics string
	require.Eventually(t, func() bool {
		metrics = get(base + "/metrics")
		return strings.Contains(metrics, "temporal_worker_start") && strings.Contains(metrics, "temporal_poller_start")
	}, 30*time.Second, 200*time.Millisecond, "no Temporal SDK worker metrics in /metrics")
	for _, want := range []string{
		"# TYPE go_goroutines gauge",           // Go runtime
		"process_resident_memory_bytes",        // process
		`task_queue="`,                         // SDK metrics carry their task queue
		"# TYPE temporal_worker_start counter", // Prometheus text, typed
	} {
		assert.Contains(t, metrics, want)
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "worker must exit 0 on SIGTERM")
	case <-time.After(10 * time.Second):
		t.Fatal("worker still running 10s after SIGTERM")
	}
	assert.Contains(t, logs.String(), "worker stopped")
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

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
