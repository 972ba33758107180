package config

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Clusters (issue 23.1): besides its own cluster (--kubeconfig, --context:
// the default cluster, named ""), a worker may deploy to more clusters,
// each named and reached through a context of the kubeconfig. A lease's
// deploy to cluster NAME runs on task queue <task queue>@NAME, whose
// activities talk to that cluster only.
type Clusters struct {
	// ClustersList is --clusters (DEPLOYFLOW_CLUSTERS_CONFIG): NAME or
	// NAME=CONTEXT, comma-separated; NAME alone uses the context NAME.
	ClustersList string
	// ClusterName is --cluster-name (DEPLOYFLOW_CLUSTER_NAME): the worker's
	// own cluster's name in placements (default local).
	ClusterName string
	// ClusterKubeconfigs is --cluster-kubeconfigs
	// (DEPLOYFLOW_CLUSTER_KUBECONFIGS): NAME=PATH, comma-separated, a
	// kubeconfig file of its own for a cluster of --clusters (the Helm
	// chart mounts one Secret per cluster); its current context, unless
	// --clusters says NAME=CONTEXT. Other clusters use --kubeconfig.
	ClusterKubeconfigs string
	// ClusterRouting is --cluster-routing (DEPLOYFLOW_CLUSTER_ROUTING):
	// NAME=ingress or NAME=gateway, comma-separated, where a cluster of
	// --clusters routes its leases' hostnames; the others route as the
	// worker does (--routing: through a Gateway of the same name in each
	// cluster, or through their Ingresses).
	ClusterRouting string
	// GlobalHostnames is --global-hostnames (DEPLOYFLOW_GLOBAL_HOSTNAMES):
	// every cluster reserves hostnames in the worker's own cluster's store,
	// so a hostname belongs to one lease across all clusters (for an
	// operator that routes the same names to several clusters); off, each
	// cluster reserves in its own.
	GlobalHostnames bool
	// GlobalIPs is --global-ips (DEPLOYFLOW_GLOBAL_IPS): every cluster
	// allocates declared IPs from the worker's own cluster's pool and
	// store, so a lease's endpoint has the same address in every cluster
	// and an address is one lease's across all (for an operator that
	// announces the same addresses from several clusters, e.g. anycast);
	// off, each cluster allocates from its own.
	GlobalIPs bool
}

// ClusterRef is one configured cluster.
type ClusterRef struct {
	Name    string // as placements name it
	Context string // the kubeconfig context that reaches it ("": the file's current context)
	// Kubeconfig is its own kubeconfig file (--cluster-kubeconfigs); ""
	// for the worker's --kubeconfig.
	Kubeconfig string
	// Routing is where its leases' hostnames go (--cluster-routing):
	// RoutingIngress or RoutingGateway; "" as the worker's --routing.
	Routing string
}

// RegisterFlags binds s to fs.
func (s *Clusters) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.ClusterName, "cluster-name", env("DEPLOYFLOW_CLUSTER_NAME", "local"), "worker: the name placements give the worker's own cluster (env DEPLOYFLOW_CLUSTER_NAME)")
	fs.BoolVar(&s.GlobalHostnames, "global-hostnames", os.Getenv("DEPLOYFLOW_GLOBAL_HOSTNAMES") == "true", "worker: hostnames are reserved across all clusters (in the worker's own cluster), one lease's in every cluster, instead of per cluster (env DEPLOYFLOW_GLOBAL_HOSTNAMES=true)")
	fs.BoolVar(&s.GlobalIPs, "global-ips", os.Getenv("DEPLOYFLOW_GLOBAL_IPS") == "true", "worker: declared IPs are allocated across all clusters (from the worker's own cluster's pool and store), a lease's endpoint having the same address in every cluster, instead of per cluster (env DEPLOYFLOW_GLOBAL_IPS=true)")
	fs.StringVar(&s.ClusterKubeconfigs, "cluster-kubeconfigs", os.Getenv("DEPLOYFLOW_CLUSTER_KUBECONFIGS"), "worker: a kubeconfig file of its own for clusters of --clusters, NAME=PATH, comma-separated (its current context, unless --clusters says NAME=CONTEXT); the others use --kubeconfig (env DEPLOYFLOW_CLUSTER_KUBECONFIGS)")
	fs.StringVar(&s.ClusterRouting, "cluster-routing", os.Getenv("DEPLOYFLOW_CLUSTER_ROUTING"), "worker: where a cluster of --clusters routes its leases' hostnames, NAME=ingress or NAME=gateway, comma-separated; the others as --routing (env DEPLOYFLOW_CLUSTER_ROUTING)")
	fs.StringVar(&s.ClustersList, "clusters", os.Getenv("DEPLOYFLOW_CLUSTERS_CONFIG"), "worker: the clusters it deploys to besides its own, NAME or NAME=CONTEXT (a context of the kubeconfig), comma-separated, e.g. staging,eu-1=prod-eu; a placement names them (env DEPLOYFLOW_CLUSTERS_CONFIG)")
}

var clusterNameRE = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,18}[a-z0-9])?$`)

// CheckClusterName says what is wrong with a cluster's name, or nil: a
// lowercase DNS label of at most 20 characters (it ends workflow IDs and
// task queue names).
func CheckClusterName(name string) error {
	if !clusterNameRE.MatchString(name) {
		return fmt.Errorf("cluster name %q: want a lowercase DNS label of at most 20 characters, such as eu-1", name)
	}
	return nil
}

// Refs parses ClustersList.
func (s Clusters) Refs() ([]ClusterRef, error) {
	files, err := s.kubeconfigs()
	if err != nil {
		return nil, err
	}
	routing, err := s.routing()
	if err != nil {
		return nil, err
	}
	var out []ClusterRef
	seen := map[string]bool{}
	for _, item := range list(s.ClustersList) {
		name, ctx, ok := strings.Cut(item, "=")
		name, ctx = strings.TrimSpace(name), strings.TrimSpace(ctx)
		file, own := files[name]
		if !ok && !own {
			ctx = name
		}
		if err := CheckClusterName(name); err != nil {
			return nil, fmt.Errorf("--clusters: %w", err)
		}
		if ctx == "" && ok {
			return nil, fmt.Errorf("--clusters: cluster %s: empty context after '=': write %s=CONTEXT or %s alone", name, name, name)
		}
		if name == s.ClusterName {
			return nil, fmt.Errorf("--clusters: cluster %s is the worker's own cluster's name (--cluster-name): give the other cluster another name", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("--clusters: cluster %s named twice: give each cluster once", name)
		}
		seen[name] = true
		out = append(out, ClusterRef{Name: name, Context: ctx, Kubeconfig: file, Routing: routing[name]})
	}
	for name := range files {
		if !seen[name] {
			return nil, fmt.Errorf("--cluster-kubeconfigs: cluster %s is not in --clusters (%s): add it there, or drop its kubeconfig", name, s.ClustersList)
		}
	}
	for name := range routing {
		if !seen[name] {
			return nil, fmt.Errorf("--cluster-routing: cluster %s is not in --clusters (%s): add it there, or drop its routing", name, s.ClustersList)
		}
	}
	return out, nil
}

// routing is --cluster-routing by cluster name.
func (s Clusters) routing() (map[string]string, error) {
	out := map[string]string{}
	for _, item := range list(s.ClusterRouting) {
		name, mode, _ := strings.Cut(item, "=")
		name, mode = strings.TrimSpace(name), strings.TrimSpace(mode)
		if name == "" || mode != RoutingIngress && mode != RoutingGateway {
			return nil, fmt.Errorf("--cluster-routing: %q: write NAME=ingress or NAME=gateway, e.g. eu-1=ingress", item)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--cluster-routing: cluster %s given twice: give each cluster one routing", name)
		}
		out[name] = mode
	}
	return out, nil
}

// kubeconfigs is --cluster-kubeconfigs by cluster name; each file must
// exist.
func (s Clusters) kubeconfigs() (map[string]string, error) {
	out := map[string]string{}
	for _, item := range list(s.ClusterKubeconfigs) {
		name, path, ok := strings.Cut(item, "=")
		name, path = strings.TrimSpace(name), strings.TrimSpace(path)
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("--cluster-kubeconfigs: %q: write NAME=PATH, e.g. eu-1=/etc/deployflow/clusters/eu-1/kubeconfig", item)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--cluster-kubeconfigs: cluster %s given twice: give each cluster one kubeconfig", name)
		}
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("--cluster-kubeconfigs: cluster %s: %w", name, err)
		}
		out[name] = path
	}
	return out, nil
}

func (s Clusters) validate() []error {
	if err := CheckClusterName(s.ClusterName); err != nil {
		return []error{fmt.Errorf("--cluster-name: %w", err)}
	}
	if _, err := s.Refs(); err != nil {
		return []error{err}
	}
	return nil
}

// ClusterTaskQueue is the task queue of a lease's deploys to cluster: the
// worker's own for the default cluster "".
func ClusterTaskQueue(taskQueue, cluster string) string {
	if cluster == "" {
		return taskQueue
	}
	return taskQueue + "@" + cluster
}
