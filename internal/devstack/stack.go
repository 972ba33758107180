// Package devstack runs deployflow's local stack on 127.0.0.1: a Temporal dev
// server, and a Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager without the deployment controller, kube-scheduler)
// whose nodes are kwok fakes. Binaries come from hack/build-tools.sh (built
// from the Go module proxy into the cache); every process's PID is recorded
// under the run directory and it is stopped by that PID only.
package devstack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Addresses of the local stack. Everything binds 127.0.0.1.
const (
	EtcdClientURL   = "http://127.0.0.1:23790"
	etcdPeerURL     = "http://127.0.0.1:23800"
	APIServerURL    = "https://127.0.0.1:16443"
	apiServerPort   = "16443"
	kcmPort         = "10257"
	schedulerPort   = "10259"
	TemporalAddress = "127.0.0.1:7233"
	TemporalUIURL   = "http://127.0.0.1:8233"
	temporalUIPort  = "8233"
	// PrometheusURL is the stack's Prometheus (canary analyses query it).
	PrometheusURL  = "http://127.0.0.1:19090"
	prometheusAddr = "127.0.0.1:19090"
	// ServiceCIDR is the virtual range Services get ClusterIPs from.
	ServiceCIDR = "10.96.0.0/16"
	// PodCIDR is the range kwok hands fake pod IPs out of.
	PodCIDR = "10.244.0.0/16"
)

// Component names, in start order.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Kwok              = "kwok"
	Temporal          = "temporal"
	Prometheus        = "prometheus"
	// Helm is a tool, not a process of the stack: the chart's tests run it.
	Helm = "helm"
)

// Components lists the stack's processes in start order.
var Components = []string{Etcd, APIServer, ControllerManager, Scheduler, Kwok, DataPlane, Gateway, Temporal, Prometheus}

// Controllers run by our kube-controller-manager: everything a ReplicaSet
// needs, the Job controller (an analysis's smoke-test Job), the
// EndpointSlice controller (a Service's endpoints, which the data plane
// and a Gateway route to), the StatefulSet controller and what binds and
// protects its claims (issue 39.4: the stack's StorageClass, StorageClass),
// and deliberately not the deployment controller — deployflow's rollout
// engine does its job.
const Controllers = "replicaset-controller,garbage-collector-controller,namespace-controller," +
	"serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller," +
	"job-controller,ttl-after-finished-controller,resourcequota-controller,endpointslice-controller," +
	"statefulset-controller,persistentvolume-binder-controller,persistentvolume-protection-controller," +
	"persistentvolumeclaim-protection-controller"

// KwokKnobs are the pod labels and annotations the local stack's fake
// pods obey (k8s/kwok/stages.yaml): reserved deployflow.dev keys its
// workers allow (--allow-pod-keys).
var KwokKnobs = []string{"deployflow.dev/ready-after", "deployflow.dev/never-ready", "deployflow.dev/exit-code"}

// Stack is the local stack rooted at a cache directory.
type Stack struct {
	RepoDir  string // the deployflow checkout (hack/, k8s/kwok)
	CacheDir string // binaries, one directory per pinned version
	RunDir   string // pids, logs, certificates, data
	Versions map[string]string
	Logf     func(format string, args ...any)
	// TemporalMode is ModeDev (the CLI's dev server) or ModePostgres (the
	// Temporal server on PostgreSQL with HistoryShards shards), from
	// DEPLOYFLOW_TEMPORAL and DEPLOYFLOW_HISTORY_SHARDS.
	TemporalMode  string
	HistoryShards int

	searchAttributes []string
}

// RunDirEnv names another run directory (the stack's data, PIDs and logs)
// than the cache's run/: a stack kept across machine sessions (make
// bench-scale's resumable run) lives apart from the one make dev-down,
// the tests and CI start clean. Its binaries still come from the cache.
const RunDirEnv = "DEPLOYFLOW_RUN_DIR"

// New reads the pinned versions from repoDir/hack/versions.env. The cache is
// $DEPLOYFLOW_CACHE, or ~/.cache/deployflow; the run directory
// $DEPLOYFLOW_RUN_DIR, or the cache's run/.
func New(repoDir string, searchAttributes []string) (*Stack, error) {
	cache := os.Getenv("DEPLOYFLOW_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, err
		}
		cache = filepath.Join(home, ".cache", "deployflow")
	}
	versions, err := readEnvFile(filepath.Join(repoDir, "hack", "versions.env"))
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"KUBERNETES_VERSION", "ETCD_VERSION", "KWOK_VERSION", "TEMPORAL_CLI_VERSION"} {
		if versions[k] == "" {
			return nil, fmt.Errorf("hack/versions.env: %s is not set", k)
		}
	}
	mode, shards, err := temporalMode()
	if err != nil {
		return nil, err
	}
	run := filepath.Join(cache, "run")
	if d := os.Getenv(RunDirEnv); d != "" {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("%s=%q: want an absolute path", RunDirEnv, d)
		}
		run = d
	}
	return &Stack{
		TemporalMode:     mode,
		HistoryShards:    shards,
		RepoDir:          repoDir,
		CacheDir:         cache,
		RunDir:           run,
		Versions:         versions,
		Logf:             func(string, ...any) {},
		searchAttributes: searchAttributes,
	}, nil
}

// FindRepo walks up from dir to the directory holding hack/versions.env.
func FindRepo(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "hack", "versions.env")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no hack/versions.env above %s: run from a deployflow checkout", dir)
		}
	}
}

func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			out[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return out, sc.Err()
}

// Bin is the path of one of the stack's binaries in the cache.
func (s *Stack) Bin(name string) string {
	switch name {
	case Etcd:
		return filepath.Join(s.CacheDir, "etcd-"+s.Versions["ETCD_VERSION"], "etcd")
	case Kwok:
		return filepath.Join(s.CacheDir, "kwok-"+s.Versions["KWOK_VERSION"], "kwok")
	case Temporal:
		return filepath.Join(s.CacheDir, "temporal-"+s.Versions["TEMPORAL_CLI_VERSION"], "temporal")
	case TemporalServer, TemporalSQLTool:
		return filepath.Join(s.CacheDir, "temporal-server-"+s.Versions["TEMPORAL_SERVER_VERSION"], name)
	case TemporalUI:
		return filepath.Join(s.CacheDir, "temporal-ui-"+s.Versions["TEMPORAL_UI_VERSION"], "temporal-ui-server")
	case Postgres:
		return postgresBin("postgres")
	case Helm:
		return filepath.Join(s.CacheDir, "helm-"+s.Versions["HELM_VERSION"], "helm")
	case Gateway:
		return filepath.Join(s.CacheDir, "traefik-"+s.Versions["TRAEFIK_VERSION"], "traefik")
	case Prometheus:
		return filepath.Join(s.CacheDir, "prometheus-"+s.Versions["PROMETHEUS_VERSION"], "prometheus")
	default: // kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
		return filepath.Join(s.CacheDir, "kubernetes-"+s.Versions["KUBERNETES_VERSION"], name)
	}
}

// Kubeconfig is the admin kubeconfig of the local cluster.
func (s *Stack) Kubeconfig() string { return filepath.Join(s.RunDir, "kubeconfig") }

// EnsureBinaries builds whatever pinned binary the cache lacks.
func (s *Stack) EnsureBinaries(ctx context.Context) error {
	missing := false
	tools := append([]string{"kubectl", Helm}, s.Processes()...)
	if s.TemporalMode == ModePostgres {
		if _, err := os.Stat(s.Bin(Postgres)); err != nil {
			return fmt.Errorf("%s=%s needs PostgreSQL's server: install Debian's postgresql package (apt-get install postgresql); no %s", TemporalModeEnv, ModePostgres, s.Bin(Postgres))
		}
		tools = append(tools, TemporalServer, TemporalSQLTool)
	}
	for _, c := range tools {
		if c == Postgres {
			continue
		}
		if _, err := os.Stat(s.Bin(c)); err != nil {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	s.Logf("building the stack's binaries (once per pinned version; a few minutes on a cold cache)")
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(s.RepoDir, "hack", "build-tools.sh"))
	cmd.Env = append(os.Environ(), "DEPLOYFLOW_CACHE="+s.CacheDir, TemporalModeEnv+"="+s.TemporalMode)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/build-tools.sh: %w", err)
	}
	return nil
}

// lock serialises Up and Down across processes (parallel test packages).
func (s *Stack) lock() (func(), error) {
	if err := os.MkdirAll(s.CacheDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(s.CacheDir, "stack.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// clusterLock serialises the start and stop of extra cluster name across
// processes, and keeps Up and Down (the stack's lock) out meanwhile;
// other clusters start and stop side by side (a test's cluster waited
// minutes behind every other test's when each start took the stack's
// lock).
func (s *Stack) clusterLock(name string) (func(), error) {
	dir := filepath.Join(s.CacheDir, "cluster-locks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	stack, err := os.OpenFile(filepath.Join(s.CacheDir, "stack.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(stack.Fd()), syscall.LOCK_SH); err != nil {
		stack.Close()
		return nil, err
	}
	one, err := os.OpenFile(filepath.Join(dir, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err == nil {
		err = syscall.Flock(int(one.Fd()), syscall.LOCK_EX)
		if err != nil {
			one.Close()
		}
	}
	if err != nil {
		stack.Close()
		return nil, err
	}
	return func() { one.Close(); stack.Close() }, nil
}

// Up starts every component that is not running, reusing those that are,
// and returns once the cluster schedules pods onto a Ready kwok node and the
// Temporal server answers. It reports whether it started anything.
func (s *Stack) Up(ctx context.Context) (started bool, err error) {
	if started, err = s.upProcesses(ctx); err != nil {
		return started, err
	}
	// Outside the stack's lock: a test binary waiting here for the cluster
	// to run a pod does not hold up another's start.
	cs, err := s.Clientset()
	if err != nil {
		return started, err
	}
	return started, s.bootstrapWithKwok(ctx, cs, s.component(Kwok), s.lock)
}

// upProcesses is Up's part under the stack's lock: the files and processes.
func (s *Stack) upProcesses(ctx context.Context) (started bool, err error) {
	unlock, err := s.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	if err := s.EnsureBinaries(ctx); err != nil {
		return false, err
	}
	for _, d := range []string{"pids", "logs", "etcd", "kwok", "prometheus/targets"} {
		if err := os.MkdirAll(filepath.Join(s.RunDir, d), 0o755); err != nil {
			return false, err
		}
	}
	if err := (pki{dir: filepath.Join(s.RunDir, "pki")}).ensure(); err != nil {
		return false, fmt.Errorf("certificates: %w", err)
	}
	if err := s.writeKubeconfig(); err != nil {
		return false, err
	}
	if err := os.WriteFile(s.auditPolicy(), []byte(auditPolicy), 0o644); err != nil {
		return false, err
	}
	if err := os.WriteFile(s.prometheusConfig(), []byte(fmt.Sprintf(prometheusConfig, s.PrometheusTargets())), 0o644); err != nil {
		return false, err
	}
	// The other Temporal mode's own processes stop: a stack switched from
	// postgres to dev mode frees the UI's port for the dev server.
	for _, name := range []string{Postgres, TemporalUI} {
		if !contains(s.Processes(), name) {
			if err := s.stop(name, 10*time.Second); err != nil {
				return false, err
			}
		}
	}
	for _, name := range s.Processes() {
		ok, err := s.upOne(ctx, name)
		if err != nil {
			return started, err
		}
		started = started || ok
	}
	return started, nil
}

// Start starts one component (and waits until it is ready) if it is not
// running. Tests use it to bring back a component they stopped.
func (s *Stack) Start(ctx context.Context, name string) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	_, err = s.upOne(ctx, name)
	return err
}

// Stop stops one component by its recorded PID, leaving its data in place.
func (s *Stack) Stop(name string) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return s.stop(name, 10*time.Second)
}

// Kill SIGKILLs one component by its recorded PID, with no grace: a crash,
// for the fault-injection suite. Its data stays; Start brings it back.
func (s *Stack) Kill(name string) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return s.stop(name, 0)
}

func (s *Stack) upOne(ctx context.Context, name string) (bool, error) {
	return s.upComponent(ctx, s.component(name))
}

func (s *Stack) upComponent(ctx context.Context, c component) (bool, error) {
	name := c.name
	if pid, ok := s.running(name); ok {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.ready(rctx)
		cancel()
		switch {
		case err == nil && s.recordedFingerprint(name) == c.fingerprint():
			s.Logf("%-24s reusing pid %d", name, pid)
			return false, nil
		case err == nil:
			s.Logf("%-24s pid %d runs with other flags: restarting it", name, pid)
		default:
			s.Logf("%-24s pid %d is not ready (%v): restarting it", name, pid, err)
		}
		if err := s.stop(name, 10*time.Second); err != nil {
			return false, err
		}
	}
	if c.before != nil {
		if err := c.before(ctx); err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
	}
	pid, err := s.start(c.process)
	if err != nil {
		return false, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	for {
		err = c.ready(rctx)
		if err == nil {
			break
		}
		if !alive(pid) {
			return true, fmt.Errorf("%s exited during start-up; end of %s:\n%s", name, s.logFile(name), s.tail(name, 3000))
		}
		select {
		case <-rctx.Done():
			return true, fmt.Errorf("%s not ready after %s: %v; end of %s:\n%s", name, c.timeout, err, s.logFile(name), s.tail(name, 3000))
		case <-time.After(200 * time.Millisecond):
		}
	}
	if c.after != nil {
		if err := c.after(rctx); err != nil {
			return true, fmt.Errorf("%s: %w", name, err)
		}
	}
	s.Logf("%-24s started pid %d", name, pid)
	return true, nil
}

// Down stops every component by PID (in reverse start order) and removes the
// cluster's and Temporal's data, so the next Up starts clean. Logs are kept.
func (s *Stack) Down() error { return s.down(false) }

// DownKeepingData stops every component as Down does but leaves the
// cluster's and Temporal's data in place: the next Up starts the same
// cluster and Temporal again, with everything in them (make bench-scale's
// fleet, created over several sessions of a machine).
func (s *Stack) DownKeepingData() error { return s.down(true) }

func (s *Stack) down(keepData bool) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	// Every mode's processes: a stack started in the other mode stops too.
	all := s.Processes()
	for _, c := range []string{Postgres, TemporalUI} {
		if !contains(all, c) {
			all = append(all, c)
		}
	}
	for i := len(all) - 1; i >= 0; i-- {
		name := all[i]
		if pid, ok := s.running(name); ok {
			s.Logf("%-24s stopping pid %d", name, pid)
		}
		if err := s.stop(name, 10*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	// Other processes a session recorded beside the stack (the demo worker).
	extra, _ := filepath.Glob(filepath.Join(s.RunDir, "pids", "*.pid"))
	for _, f := range extra {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		if pid, ok := s.running(name); ok {
			s.Logf("%-24s stopping pid %d", name, pid)
		}
		if err := s.stop(name, 10*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && !keepData {
		for _, d := range stackData {
			if err := os.RemoveAll(filepath.Join(s.RunDir, d)); err != nil {
				errs = append(errs, err)
			}
		}
		if os.Geteuid() == 0 {
			if err := os.RemoveAll(s.postgresData()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// stackData is what Down removes from the run directory: every cluster's
// and Temporal's state (the dev server's SQLite with its write-ahead log:
// a log left beside a new database would be replayed into it).
var stackData = []string{"etcd", "kwok", "pki", "temporal.db", "temporal.db-wal", "temporal.db-shm", "kubeconfig", "clusters",
	"postgres", "temporal-schema.done", "temporal-server", "temporal-ui", "gateway"}

// ComponentStatus is one line of `make dev-status`.
type ComponentStatus struct {
	Name    string
	PID     int
	Running bool
	Ready   error
}

// Status reports each component's PID and readiness.
func (s *Stack) Status(ctx context.Context) []ComponentStatus {
	var out []ComponentStatus
	for _, name := range s.Processes() {
		st := ComponentStatus{Name: name}
		st.PID, st.Running = s.running(name)
		if st.Running {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			st.Ready = s.component(name).ready(rctx)
			cancel()
		}
		out = append(out, st)
	}
	return out
}

// StartControllerManager starts an extra kube-controller-manager running
// only the given controllers (make bench: the native deployment controller),
// recorded like the stack's own processes so `dev-down` stops it too. The
// returned function stops it by PID.
func (s *Stack) StartControllerManager(ctx context.Context, name, controllers, port string) (stop func() error, err error) {
	c := s.component(ControllerManager)
	c.process.name = name
	c.process.restart = false // measured by make bench: the PID is the controller's own
	for i, a := range c.process.args {
		switch {
		case strings.HasPrefix(a, "--controllers="):
			c.process.args[i] = "--controllers=" + controllers
		case strings.HasPrefix(a, "--secure-port="):
			c.process.args[i] = "--secure-port=" + port
		}
	}
	c.ready = httpOK("https://127.0.0.1:"+port+"/healthz", "ok")
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := s.upComponent(ctx, c); err != nil {
		return nil, err
	}
	return func() error { return s.stop(name, 10*time.Second) }, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
