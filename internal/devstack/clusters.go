package devstack

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Extra clusters (issue 23.6): beside the stack's own cluster, more
// clusters run on the same machine for the multi-cluster work, each one
// cheap: its own kube-apiserver on the stack's etcd under its own key
// prefix (so no object is shared), its own controller-manager, scheduler
// and kwok with the same fake nodes. Its processes are recorded by PID
// like the stack's (`make dev-down` stops them); its kubeconfig is its
// own file, in its own directory of the run directory, and the stack's
// kubeconfig names it as a context too (its current context stays the
// stack's own cluster).

// Cluster is one extra cluster of the stack.
type Cluster struct {
	Name string
	// URL is its API server's address; Kubeconfig an admin kubeconfig
	// whose context is named after the cluster.
	URL        string
	Kubeconfig string
}

// MaxClusters is how many extra clusters a stack can run (each takes a
// port of its own per component). Numbers 1 to FirstTestCluster-1 are
// named by their users: make dev-up's DEPLOYFLOW_CLUSTERS (1, 2, ...),
// make chaos's shared cluster (3), make demo's demo-eu (4); tests take the
// rest with ReserveCluster.
const (
	MaxClusters      = 20
	FirstTestCluster = 5
)

var clusterName = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,18}[a-z0-9])?$`)

// clusterPorts are the ports of extra cluster n (1..MaxClusters): beside
// the stack's own (16443, 10257, 10259) and the bench's extra
// controller-managers (10260-10262).
func clusterPorts(n int) (apiserver, kcm, scheduler string) {
	return strconv.Itoa(16443 + n), strconv.Itoa(10300 + n), strconv.Itoa(10400 + n)
}

// ReserveCluster takes an extra cluster number from FirstTestCluster to
// MaxClusters that no other holder has, in this process or another (a
// lock file per number: test binaries run side by side), waiting while
// all are taken. release gives it back; a process that ends gives back
// what it held.
func (s *Stack) ReserveCluster(ctx context.Context) (n int, release func(), err error) {
	dir := filepath.Join(s.RunDir, "cluster-numbers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, nil, err
	}
	for {
		for n := FirstTestCluster; n <= MaxClusters; n++ {
			f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(n)+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				return 0, nil, err
			}
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				f.Close()
				continue
			}
			return n, func() { f.Close() }, nil
		}
		select {
		case <-ctx.Done():
			return 0, nil, fmt.Errorf("no extra cluster number free (%d to %d are all taken): %w", FirstTestCluster, MaxClusters, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Stack) clusterDir(name string) string { return filepath.Join(s.RunDir, "clusters", name) }

// ClusterKubeconfig is extra cluster name's own admin kubeconfig (its one
// context current), as a Secret would hold it.
func (s *Stack) ClusterKubeconfig(name string) string {
	return filepath.Join(s.clusterDir(name), "kubeconfig")
}

// clusterProcess is the name under which a process of extra cluster name
// is recorded (its PID file, its log).
func clusterProcess(component, name string) string { return component + "@" + name }

// StartCluster starts extra cluster number n (1..MaxClusters) named name,
// or reuses it if it runs, and waits until it can run pods. The stack's
// etcd must be up (Up).
func (s *Stack) StartCluster(ctx context.Context, name string, n int) (*Cluster, error) {
	if !clusterName.MatchString(name) {
		return nil, fmt.Errorf("cluster name %q: use a lowercase DNS label of at most 20 characters (e.g. eu-1)", name)
	}
	if n < 1 || n > MaxClusters {
		return nil, fmt.Errorf("cluster %s: number %d out of range: use 1 to %d", name, n, MaxClusters)
	}
	apiPort, kcmPort, schedPort := clusterPorts(n)
	c := &Cluster{Name: name, URL: "https://127.0.0.1:" + apiPort, Kubeconfig: s.ClusterKubeconfig(name)}
	if err := os.MkdirAll(filepath.Join(s.clusterDir(name), "kwok"), 0o755); err != nil {
		return nil, err
	}
	if err := replaceFile(c.Kubeconfig, s.kubeconfigFor(name, c.URL)); err != nil {
		return nil, err
	}
	health := s.kubeHealthOf(c.Kubeconfig, "/readyz")

	api := s.component(APIServer)
	api.name = clusterProcess(APIServer, name)
	api.args = withFlags(api.args, map[string]string{
		"--secure-port":    apiPort,
		"--audit-log-path": filepath.Join(s.RunDir, "logs", "audit-"+name+".log"),
	})
	api.args = append(api.args, "--etcd-prefix=/deployflow-cluster-"+name)
	api.ready = health

	kubeconfigs := map[string]string{"--kubeconfig": c.Kubeconfig, "--authentication-kubeconfig": c.Kubeconfig, "--authorization-kubeconfig": c.Kubeconfig}
	kcm := s.component(ControllerManager)
	kcm.name = clusterProcess(ControllerManager, name)
	kcm.args = withFlags(kcm.args, merged(kubeconfigs, map[string]string{"--secure-port": kcmPort}))
	kcm.ready = httpOK("https://127.0.0.1:"+kcmPort+"/healthz", "ok")

	sched := s.component(Scheduler)
	sched.name = clusterProcess(Scheduler, name)
	sched.args = withFlags(sched.args, merged(kubeconfigs, map[string]string{"--secure-port": schedPort}))
	sched.ready = httpOK("https://127.0.0.1:"+schedPort+"/healthz", "ok")

	kwok := s.component(Kwok)
	kwok.name = clusterProcess(Kwok, name)
	kwok.args = withFlags(kwok.args, map[string]string{"--kubeconfig": c.Kubeconfig})
	kwok.env = []string{"HOME=" + filepath.Join(s.clusterDir(name), "kwok")}
	kwok.ready = health

	if err := s.upCluster(ctx, name, []component{api, kcm, sched, kwok}); err != nil {
		return nil, err
	}
	cs, err := clientsetOf(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	// Unlocked: tests wait for their clusters' pods side by side.
	if err := s.bootstrapWithKwok(ctx, cs, kwok, func() (func(), error) { return s.clusterLock(name) }); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	if err := s.writeKubeconfig(); err != nil {
		return nil, fmt.Errorf("cluster %s: the stack's kubeconfig: %w", name, err)
	}
	return c, nil
}

// upCluster starts the processes of extra cluster name, under its lock.
func (s *Stack) upCluster(ctx context.Context, name string, comps []component) error {
	unlock, err := s.clusterLock(name)
	if err != nil {
		return err
	}
	defer unlock()
	for _, comp := range comps {
		if _, err := s.upComponent(ctx, comp); err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	return nil
}

// ClustersEnv names the extra clusters `make dev-up` starts beside the
// stack's own, e.g. DEPLOYFLOW_CLUSTERS="staging eu-1" (numbered 1, 2, ...
// in that order: their ports).
const ClustersEnv = "DEPLOYFLOW_CLUSTERS"

// ClustersFrom parses a ClustersEnv value: names separated by spaces or
// commas, each once, at most FirstTestCluster-1 (the numbers tests do not
// take).
func ClustersFrom(v string) ([]string, error) {
	names := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
	if len(names) >= FirstTestCluster {
		return nil, fmt.Errorf("%s: %d clusters; make dev-up starts at most %d (the higher numbers are the tests')", ClustersEnv, len(names), FirstTestCluster-1)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return nil, fmt.Errorf("%s: cluster %q named twice", ClustersEnv, n)
		}
		seen[n] = true
	}
	return names, nil
}

// StartClusters starts (or reuses) the extra clusters names, the first as
// number 1, and so on.
func (s *Stack) StartClusters(ctx context.Context, names []string) ([]*Cluster, error) {
	var out []*Cluster
	for i, name := range names {
		c, err := s.StartCluster(ctx, name, i+1)
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// writeKubeconfig writes the stack's kubeconfig: its own cluster, the
// current context, and a cluster and a context for each extra cluster the
// run directory holds (running or stopped: its objects stay for a later
// start). It is written whole, in one rename: a test binary starting
// beside another's extra cluster once made the file lack that cluster's
// context for a moment (written first without the extra clusters, then
// with them), and `kubectl --context` failed.
func (s *Stack) writeKubeconfig() error {
	// One writer at a time, in any process: a writer that read the
	// clusters before another's was added must not replace its file.
	lock, err := os.OpenFile(filepath.Join(s.RunDir, "kubeconfig.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	cfg, err := clientcmd.Load(s.kubeconfigFor("deployflow-dev", APIServerURL))
	if err != nil {
		return err
	}
	dirs, err := os.ReadDir(filepath.Join(s.RunDir, "clusters"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, d := range dirs {
		extra, err := clientcmd.LoadFromFile(filepath.Join(s.clusterDir(d.Name()), "kubeconfig"))
		if err != nil || extra.Clusters[d.Name()] == nil || extra.Contexts[d.Name()] == nil {
			continue // not a cluster's directory
		}
		cfg.Clusters[d.Name()] = extra.Clusters[d.Name()]
		cfg.Contexts[d.Name()] = extra.Contexts[d.Name()]
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return replaceFile(s.Kubeconfig(), data)
}

// StopCluster stops extra cluster name's processes by their recorded PIDs
// (its objects stay in etcd, under its prefix, for a later StartCluster).
func (s *Stack) StopCluster(name string) error {
	unlock, err := s.clusterLock(name)
	if err != nil {
		return err
	}
	defer unlock()
	for _, comp := range []string{Gateway, Kwok, Scheduler, ControllerManager, APIServer} {
		if err := s.stop(clusterProcess(comp, name), 10*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// withFlags sets each --flag=value of args named in set (appending those
// args lack).
func withFlags(args []string, set map[string]string) []string {
	out := append([]string(nil), args...)
	done := map[string]bool{}
	for i, a := range out {
		flag, _, _ := strings.Cut(a, "=")
		if v, ok := set[flag]; ok {
			out[i], done[flag] = flag+"="+v, true
		}
	}
	var missing []string
	for flag := range set {
		if !done[flag] {
			missing = append(missing, flag)
		}
	}
	sort.Strings(missing) // the same flags in the same order: the process's fingerprint
	for _, flag := range missing {
		out = append(out, flag+"="+set[flag])
	}
	return out
}

func merged(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

func clientsetOf(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "deployflow-devstack"
	return kubernetes.NewForConfig(cfg)
}
