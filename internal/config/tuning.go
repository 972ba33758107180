package config

import (
	"flag"
	"fmt"
	"os"
	"strconv"
)

// Tuning is the worker's Temporal concurrency. Zero means the SDK's
// default, shown in each flag's help; raise the slots for a large fleet on
// a big machine, lower them to bound a small one.
type Tuning struct {
	MaxConcurrentActivities      int // --max-concurrent-activities
	MaxConcurrentLocalActivities int // --max-concurrent-local-activities
	MaxConcurrentWorkflowTasks   int // --max-concurrent-workflow-tasks
	WorkflowTaskPollers          int // --workflow-task-pollers
	ActivityTaskPollers          int // --activity-task-pollers
	StickyCacheSize              int // --sticky-cache-size
	// KubeAPIQPS / KubeAPIBurst bound the worker's Kubernetes requests
	// (client-go's rate limiter, as kube-controller-manager's flags of the
	// same names). client-go's own default, 5 a second, made a fleet of
	// deploys wait on the client, not on the cluster; so did 50 (issue
	// 22.3: a deploy makes about 35 requests, so 100 deploys at once
	// queued some 70s in the client). The API server's priority and
	// fairness is what protects it; this is a backstop against a runaway
	// worker.
	KubeAPIQPS   int // --kube-api-qps
	KubeAPIBurst int // --kube-api-burst
}

// Defaults of the worker's Kubernetes rate limit.
const (
	DefaultKubeAPIQPS   = 1000
	DefaultKubeAPIBurst = 2000
)

// DefaultStickyCacheSize is how many workflows a worker keeps in memory
// between their tasks unless told (--sticky-cache-size), where the SDK
// would keep 10,000. Issue 40.2, measured with make bench (a worker's
// memory at rest and its workflow cache, docs/performance.md): a cached
// idle lease's workflow is about 0.1 MiB of the worker's memory (three
// goroutines and their state), and evicting it costs a replay of its
// run's few events at its next task (a lease continues as new after each
// deploy). So the cache is sized for the work in flight, not the fleet:
// 1,000 deploys at once are 2,000 workflows (each lease's and its
// rollout's), about 200 MiB; an idle fleet of any size costs no more.
const DefaultStickyCacheSize = 2000

// RegisterFlags binds t to fs, with defaults from the environment.
func (t *Tuning) RegisterFlags(fs *flag.FlagSet) {
	knobs := []struct {
		v          *int
		name, env  string
		usage, def string // def: the SDK's default, which 0 asks for
		ours       int    // the default when the environment sets none (0: the SDK's)
	}{
		{&t.MaxConcurrentActivities, "max-concurrent-activities", "DEPLOYFLOW_MAX_CONCURRENT_ACTIVITIES", "activities (Kubernetes calls, waits) run at once", "1000", 0},
		{&t.MaxConcurrentLocalActivities, "max-concurrent-local-activities", "DEPLOYFLOW_MAX_CONCURRENT_LOCAL_ACTIVITIES", "local activities (a rollout's scale steps) run at once", "1000", 0},
		{&t.MaxConcurrentWorkflowTasks, "max-concurrent-workflow-tasks", "DEPLOYFLOW_MAX_CONCURRENT_WORKFLOW_TASKS", "workflow tasks (deploy decisions) run at once", "1000", 0},
		{&t.WorkflowTaskPollers, "workflow-task-pollers", "DEPLOYFLOW_WORKFLOW_TASK_POLLERS", "concurrent long polls for workflow tasks", "2", 0},
		{&t.ActivityTaskPollers, "activity-task-pollers", "DEPLOYFLOW_ACTIVITY_TASK_POLLERS", "concurrent long polls for activity tasks", "2", 0},
		{&t.StickyCacheSize, "sticky-cache-size", "DEPLOYFLOW_STICKY_CACHE_SIZE", "workflows kept in memory between tasks (process-wide; more: less replay, more memory)", "10000", DefaultStickyCacheSize},
	}
	for _, k := range knobs {
		def, err := strconv.Atoi(os.Getenv(k.env))
		if err != nil {
			def = k.ours
		}
		fs.IntVar(k.v, k.name, def, fmt.Sprintf("worker: %s; 0: the SDK's default (%s) (env %s)", k.usage, k.def, k.env))
	}
	for _, k := range []struct {
		v         *int
		name, env string
		def       int
		usage     string
	}{
		{&t.KubeAPIQPS, "kube-api-qps", "DEPLOYFLOW_KUBE_API_QPS", DefaultKubeAPIQPS, "Kubernetes requests a second, sustained"},
		{&t.KubeAPIBurst, "kube-api-burst", "DEPLOYFLOW_KUBE_API_BURST", DefaultKubeAPIBurst, "Kubernetes requests in a burst above --kube-api-qps"},
	} {
		def := k.def
		if v, err := strconv.Atoi(os.Getenv(k.env)); err == nil {
			def = v
		}
		fs.IntVar(k.v, k.name, def, fmt.Sprintf("worker: %s (env %s)", k.usage, k.env))
	}
}

func (t *Tuning) validate() []error {
	var errs []error
	for name, v := range map[string]int{
		"--max-concurrent-activities": t.MaxConcurrentActivities, "--max-concurrent-local-activities": t.MaxConcurrentLocalActivities,
		"--max-concurrent-workflow-tasks": t.MaxConcurrentWorkflowTasks, "--workflow-task-pollers": t.WorkflowTaskPollers,
		"--activity-task-pollers": t.ActivityTaskPollers, "--sticky-cache-size": t.StickyCacheSize,
	} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s %d: want 0 (the SDK's default) or more", name, v))
		}
	}
	if t.KubeAPIQPS <= 0 || t.KubeAPIBurst < t.KubeAPIQPS {
		errs = append(errs, fmt.Errorf("--kube-api-qps %d, --kube-api-burst %d: want a positive QPS and a burst at least as large", t.KubeAPIQPS, t.KubeAPIBurst))
	}
	if t.MaxConcurrentWorkflowTasks == 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-workflow-tasks 1: want 2 or more (the SDK needs one slot for sticky and one for normal polls)"))
	}
	return errs
}
