package testenv

import (
	"context"
	"github.com/deployflow/deployflow/internal/devstack"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/deployflow/deployflow/activities/fleet"
	"github.com/deployflow/deployflow/internal/config"
	"github.com/deployflow/deployflow/k8s/kube"
	"github.com/deployflow/deployflow/worker/app"
)

// Cluster starts (or reuses) extra cluster number n (1-9) of the stack,
// named name, and returns it as a worker's --clusters would have it: its
// clients and deployflow's activities on it, its CRDs checked or installed
// as the worker does at start. It is stopped when the test ends (its
// objects stay in etcd for the next start, a few seconds): an idle cluster
// would take CPU from every other test. Each test binary uses numbers of
// its own, so tests running side by side share none: 2 the starter's, 3
// make chaos's, 4 make demo's, 5 and 6 the workflows package's, 7 the
// worker package's, 8 the workflows package's outage test, 9 the
// devstack package's.
func (e *Env) Cluster(t testing.TB, name string, n int) *app.Cluster {
	t.Helper()
	cl := e.SharedCluster(t, name, n)
	t.Cleanup(func() {
		if err := e.Stack.StopCluster(name); err != nil {
			t.Logf("stop extra cluster %s: %v", name, err)
		}
	})
	return cl
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
