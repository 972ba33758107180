package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/deployflow/deployflow/activities/fleet"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/internal/devstack"
	"github.com/deployflow/deployflow/k8s/kube"
	"github.com/deployflow/deployflow/worker/app"
)

// Cluster starts an extra cluster of the test's own and returns it as a
// worker's --clusters would have it: its clients and deployflow's
// activities on it, its CRDs checked or installed as the worker does at
// start. It is named prefix-N, N its number (its ports), taken with
// Stack.ReserveCluster, so tests side by side, in this test binary or
// another, never share a cluster. It is stopped when the test ends (its
// objects stay in etcd for the next start of that name, a few seconds): an
// idle cluster would take CPU from every other test.
func (e *Env) Cluster(t testing.TB, prefix string) *app.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n, release, err := e.Stack.ReserveCluster(ctx)
	if err != nil {
		t.Fatalf("extra cluster %s: %v", prefix, err)
	}
	t.Cleanup(release)
	name := fmt.Sprintf("%s-%d", prefix, n)
	clusterNumbers.Store(name, n)
	t.Cleanup(func() {
		if err := e.Stack.StopCluster(name); err != nil {
			t.Logf("stop extra cluster %s: %v", name, err)
		}
	})
	return e.SharedCluster(t, name, n)
}

// clusterNumbers are the numbers of the clusters Cluster started.
var clusterNumbers sync.Map // name -> int

// clusterNumber is the number of the test's extra cluster name (Cluster).
func clusterNumber(t testing.TB, name string) int {
	t.Helper()
	n, ok := clusterNumbers.Load(name)
	if !ok {
		t.Fatalf("extra cluster %s: not one of the test's", name)
	}
	return n.(int)
}

// StartClusterAgain starts the processes of a cluster of the test's
// (Cluster) again, after the test stopped some of them.
func (e *Env) StartClusterAgain(t testing.TB, name string) {
	t.Helper()
	n := clusterNumber(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := e.Stack.StartCluster(ctx, name, n); err != nil {
		t.Fatalf("extra cluster %s: %v", name, err)
	}
}

// ClusterGateway starts a Gateway in the test's extra cluster name
// (Cluster), as the stack's own cluster has one (devstack's
// ClusterGateway; stopped with the cluster), and returns its listener's
// address.
func (e *Env) ClusterGateway(t testing.TB, name string) string {
	t.Helper()
	n := clusterNumber(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	addr, err := e.Stack.ClusterGateway(ctx, name, n)
	if err != nil {
		t.Fatalf("extra cluster %s's Gateway: %v", name, err)
	}
	return addr
}

// SharedCluster is Cluster left running when the test ends, for tests
// that use one cluster side by side (make chaos's runs); make dev-down
// stops it.
func (e *Env) SharedCluster(t testing.TB, name string, n int) *app.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := e.Stack.StartCluster(ctx, name, n)
	if err != nil {
		t.Fatalf("extra cluster %s: %v", name, err)
	}
	rc, err := kube.RESTConfig(c.Kubeconfig, "", "deployflow-test")
	if err != nil {
		t.Fatalf("extra cluster %s: %v", name, err)
	}
	cl, err := app.ClusterOn(config.ClusterRef{Name: name, Context: name}, rc, e.Activities(), IPPool.String(), BlockedHostnames)
	if err != nil {
		t.Fatalf("extra cluster %s: %v", name, err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := app.CheckClusters(config.Config{InstallCRDs: true}, app.Clusters{cl}, log); err != nil {
		t.Fatalf("extra cluster %s: %v", name, err)
	}
	return cl
}

// ClusterWorker starts, beside the worker of task queue tq, the worker of
// cluster cl's lease workflows (task queue tq@<cluster>), stopped when the
// test ends.
func (e *Env) ClusterWorker(t testing.TB, tq string, cl *app.Cluster) string {
	t.Helper()
	ctq := config.ClusterTaskQueue(tq, cl.Name)
	w := worker.New(e.Temporal, ctq, worker.Options{WorkerStopTimeout: 2 * time.Second})
	app.Register(w, cl.Activities)
	if err := w.Start(); err != nil {
		t.Fatalf("start cluster %s's worker: %v", cl.Name, err)
	}
	t.Cleanup(w.Stop)
	return ctq
}

// PlacementWorker starts an in-process worker as one started with
// --clusters would be: on a task queue of its own, the lease workflows of
// its own cluster (named "local" in placements), the placement workflows
// and their activities, and one worker per cluster of cls on its queue.
// All stop when the test ends; it returns the task queue.
func (e *Env) PlacementWorker(t testing.TB, cls ...*app.Cluster) string {
	t.Helper()
	return e.worker(t, nil, func(tq string, w worker.Worker) {
		f := &fleet.Activities{Temporal: e.Temporal, TaskQueue: tq, Self: fleet.DefaultSelf, Poll: 250 * time.Millisecond,
			AllowedPodKeys: devstack.KwokKnobs} // as the stack's workers
		for _, cl := range cls {
			f.Clusters = append(f.Clusters, cl.Name)
			e.ClusterWorker(t, tq, cl)
		}
		f.Register(w)
	})
}
