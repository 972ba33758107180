// Command devstack runs deployflow's local stack (Temporal dev server and a
// kwok-backed Kubernetes control plane) on 127.0.0.1.
//
//	devstack up            start what is not running, reuse what is (and the
//	                       extra clusters DEPLOYFLOW_CLUSTERS names)
//	devstack down          stop everything by recorded PID, drop the data
//	devstack down --keep-data    stop everything, keep the data for the next up
//	devstack status        one line per component; exit 1 if any is down
//	devstack env           shell exports for KUBECONFIG and TEMPORAL_ADDRESS
//	devstack stop NAME     stop one component (tests: API server outages)
//	devstack start NAME    start one stopped component
//	devstack running       exit 0 if every component runs (for make test)
//	devstack cluster-up NAME N    start extra cluster N (1-9) named NAME
//	devstack cluster-down NAME    stop extra cluster NAME
//	devstack serve-pods    the data plane (a component up starts)
//
// DEPLOYFLOW_RUN_DIR puts the stack's data, PIDs and logs elsewhere than
// the cache's run/ (a stack kept across sessions, apart from the one the
// tests start clean).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/internal/searchattr"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 2 {
		return fmt.Errorf("usage: devstack up|down [--keep-data]|status|env|running|stop NAME|start NAME")
	}
	if os.Args[1] == "serve-pods" {
		return servePods()
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	repo, err := devstack.FindRepo(wd)
	if err != nil {
		return err
	}
	s, err := devstack.New(repo, searchattr.Registration())
	if err != nil {
		return err
	}
	s.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "devstack: "+f+"\n", a...) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch cmd := os.Args[1]; cmd {
	case "up":
		t0 := time.Now()
		started, err := s.Up(ctx)
		if err != nil {
			return err
		}
		if started {
			fmt.Fprintf(os.Stderr, "devstack: stack up in %s\n", time.Since(t0).Round(100*time.Millisecond))
		} else {
			fmt.Fprintln(os.Stderr, "devstack: stack already running; reused it")
		}
		names, err := devstack.ClustersFrom(os.Getenv(devstack.ClustersEnv))
		if err != nil {
			return err
		}
		clusters, err := s.StartClusters(ctx, names)
		if err != nil {
			return err
		}
		printEnv(s)
		for _, c := range clusters {
			fmt.Printf("# cluster %s: %s (context %s of $KUBECONFIG)\n", c.Name, c.URL, c.Name)
		}
		fmt.Printf("# Temporal UI: %s\n", devstack.TemporalUIURL)
		fmt.Printf("# Prometheus: %s (canary analyses; the worker's --prometheus-url)\n", devstack.PrometheusURL)
	case "down":
		switch {
		case len(os.Args) == 2:
			return s.Down()
		case len(os.Args) == 3 && os.Args[2] == "--keep-data":
			return s.DownKeepingData()
		}
		return fmt.Errorf("usage: devstack down [--keep-data]")
	case "status":
		down := false
		for _, c := range s.Status(ctx) {
			state := "stopped"
			switch {
			case c.Running && c.Ready == nil:
				state = "ready"
			case c.Running:
				state = "not ready: " + c.Ready.Error()
			}
			if state != "ready" {
				down = true
			}
			pid := "-"
			if c.Running {
				pid = fmt.Sprint(c.PID)
			}
			fmt.Printf("%-24s %-8s %s\n", c.Name, pid, state)
		}
		if down {
			os.Exit(1)
		}
	case "running":
		for _, c := range s.Status(ctx) {
			if !c.Running || c.Ready != nil {
				os.Exit(1)
			}
		}
	case "env":
		printEnv(s)
	case "stop", "start":
		if len(os.Args) != 3 {
			return fmt.Errorf("usage: devstack %s NAME (one of %v)", cmd, s.Processes())
		}
		if cmd == "stop" {
			return s.Stop(os.Args[2])
		}
		return s.Start(ctx, os.Args[2])
	case "cluster-up":
		if len(os.Args) != 4 {
			return fmt.Errorf("usage: devstack cluster-up NAME N (N from 1 to %d)", devstack.MaxClusters)
		}
		n, err := strconv.Atoi(os.Args[3])
		if err != nil {
			return fmt.Errorf("cluster-up %s: N %q: want a number from 1 to %d", os.Args[2], os.Args[3], devstack.MaxClusters)
		}
		c, err := s.StartCluster(ctx, os.Args[2], n)
		if err != nil {
			return err
		}
		fmt.Printf("# cluster %s: %s\nexport KUBECONFIG=%s\n", c.Name, c.URL, c.Kubeconfig)
	case "cluster-down":
		if len(os.Args) != 3 {
			return fmt.Errorf("usage: devstack cluster-down NAME")
		}
		return s.StopCluster(os.Args[2])
	default:
		return fmt.Errorf("unknown command %q: want up, down, status, env, running, stop, start, cluster-up or cluster-down", cmd)
	}
	return nil
}

func printEnv(s *devstack.Stack) {
	fmt.Printf("export DEPLOYFLOW_CACHE=%s\n", s.CacheDir)
	if d := os.Getenv(devstack.RunDirEnv); d != "" {
		fmt.Printf("export %s=%s\n", devstack.RunDirEnv, d)
	}
	fmt.Printf("export KUBECONFIG=%s\n", s.Kubeconfig())
	fmt.Printf("export TEMPORAL_ADDRESS=%s\n", devstack.TemporalAddress)
	fmt.Printf("export DEPLOYFLOW_PROMETHEUS_URL=%s\n", devstack.PrometheusURL)
	// The fake pods' knobs (k8s/kwok/stages.yaml) are reserved keys a
	// worker refuses unless allowed: the local stack's workers allow them.
	fmt.Printf("export DEPLOYFLOW_ALLOW_POD_KEYS=%s\n", strings.Join(devstack.KwokKnobs, ","))
	// Its GPU node's model, and one no node has (a deploy asking for it
	// is accepted and never schedules; one asking for another is refused).
	fmt.Printf("export DEPLOYFLOW_GPU_MODELS=%s\n", devstack.GPUModels)
	// Its StorageClass (internal/devstack/storage.go): persistent volumes
	// of that class bind on the stack.
	fmt.Printf("export DEPLOYFLOW_STORAGE_CLASSES=%s\n", devstack.StorageClass)
	fmt.Printf("export PATH=%s:$PATH\n", filepath.Dir(s.Bin("kubectl")))
}

// servePods is the data plane component (devstack.DataPlane), which up
// starts in the stack's run directory: it needs no checkout.
func servePods() error {
	fs := flag.NewFlagSet("serve-pods", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "the cluster whose pods to serve")
	cidr := fs.String("pod-cidr", devstack.PodCIDR, "the fake pods' IP range")
	listen := fs.String("listen", "127.0.0.1:16480", "the health endpoint")
	if err := fs.Parse(os.Args[2:]); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, "devstack serve-pods: "+f+"\n", a...) }
	return devstack.ServePods(ctx, *kubeconfig, *cidr, *listen, logf)
}
