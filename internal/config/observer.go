package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ObserverSharing is how the observers of several workers share the
// leases (internal/observe/members.go): each worker renews a
// coordination.k8s.io Lease in ObserverNamespace, and the live workers of
// one group split the leases between them.
type ObserverSharing struct {
	// ObserverNamespace (DEPLOYFLOW_OBSERVER_NAMESPACE) holds the workers'
	// membership records; empty: the kubeconfig context's namespace (in a
	// pod, its own), else default.
	ObserverNamespace string
	// ObserverIdentity (DEPLOYFLOW_OBSERVER_IDENTITY) names this worker in
	// its group; default <hostname>-<pid> (a pod's name is its hostname).
	ObserverIdentity string
	// ObserverGroup (DEPLOYFLOW_OBSERVER_GROUP): the workers that share
	// the leases; default <Temporal namespace>/<task queue>.
	ObserverGroup string
	// ObserverTTL (DEPLOYFLOW_OBSERVER_TTL): a worker not seen renewing
	// its membership for this long is gone, and its leases move.
	ObserverTTL time.Duration
	// ObserverSenders (DEPLOYFLOW_OBSERVER_SENDERS): observations a worker
	// sends at once, each to another lease's workflow.
	ObserverSenders int
}

// DefaultObserverSenders is how many observations a worker sends at once
// unless told. Each is a Temporal update that waits for the lease
// workflow's task, so a worker's rate is this many over an update's
// round trip: make bench-scale at 2,000 leases on PostgreSQL, four at a
// time (the default before), took a burst of 500 changes in over five
// minutes, the updates seconds each on the loaded server (issue 40.1).
const DefaultObserverSenders = 32

// RegisterFlags binds s to fs.
func (s *ObserverSharing) RegisterFlags(fs *flag.FlagSet) {
	host, _ := os.Hostname()
	ttl, err := time.ParseDuration(env("DEPLOYFLOW_OBSERVER_TTL", "15s"))
	if err != nil {
		ttl = -1 // reported by validate
	}
	fs.StringVar(&s.ObserverNamespace, "observer-namespace", os.Getenv("DEPLOYFLOW_OBSERVER_NAMESPACE"), "worker: the namespace of the workers' membership records (coordination.k8s.io Leases) that share the leases' observations; default: the kubeconfig context's namespace, in a pod its own (env DEPLOYFLOW_OBSERVER_NAMESPACE)")
	fs.StringVar(&s.ObserverIdentity, "observer-identity", env("DEPLOYFLOW_OBSERVER_IDENTITY", host+"-"+strconv.Itoa(os.Getpid())), "worker: this worker's name among those sharing the leases' observations, unique (env DEPLOYFLOW_OBSERVER_IDENTITY)")
	fs.StringVar(&s.ObserverGroup, "observer-group", os.Getenv("DEPLOYFLOW_OBSERVER_GROUP"), "worker: the workers that share the leases' observations (each lease observed by one of them); default <Temporal namespace>/<task queue> (env DEPLOYFLOW_OBSERVER_GROUP)")
	senders, err := strconv.Atoi(env("DEPLOYFLOW_OBSERVER_SENDERS", strconv.Itoa(DefaultObserverSenders)))
	if err != nil {
		senders = -1 // reported by validate
	}
	fs.IntVar(&s.ObserverSenders, "observer-senders", senders, "worker: observations sent at once, each to another lease's workflow (env DEPLOYFLOW_OBSERVER_SENDERS)")
	fs.DurationVar(&s.ObserverTTL, "observer-ttl", ttl, "worker: a worker not seen renewing its membership for this long is gone and its leases are observed by the others; renewed every third of it (env DEPLOYFLOW_OBSERVER_TTL)")
}

// Group is ObserverGroup, or <Temporal namespace>/<task queue>.
func (c Config) Group() string {
	if c.ObserverGroup != "" {
		return c.ObserverGroup
	}
	return c.TemporalNamespace + "/" + c.TaskQueue
}

func (s ObserverSharing) validate() []error {
	var errs []error
	if s.ObserverTTL < 3*time.Second {
		errs = append(errs, errors.New("--observer-ttl: want a duration of at least 3s such as 15s (env DEPLOYFLOW_OBSERVER_TTL)"))
	}
	if s.ObserverSenders < 1 || s.ObserverSenders > 1000 {
		errs = append(errs, fmt.Errorf("--observer-senders %d: want 1 to 1000, such as %d (env DEPLOYFLOW_OBSERVER_SENDERS)", s.ObserverSenders, DefaultObserverSenders))
	}
	if s.ObserverIdentity == "" {
		errs = append(errs, errors.New("--observer-identity is empty: set a name unique among the workers, such as the pod's name (env DEPLOYFLOW_OBSERVER_IDENTITY)"))
	}
	if ns := s.ObserverNamespace; ns != "" {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--observer-namespace: %q is not a namespace name (%s)", ns, msgs[0]))
		}
	}
	return errs
}
