package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 23.1: --clusters names the worker's other clusters, NAME (its
// context) or NAME=CONTEXT; a bad list is refused naming the flag and the fix.
func TestClustersFlag(t *testing.T) {
	refs, err := Clusters{ClustersList: "staging, eu-1=prod-eu"}.Refs()
	require.NoError(t, err)
	assert.Equal(t, []ClusterRef{{Name: "staging", Context: "staging"}, {Name: "eu-1", Context: "prod-eu"}}, refs)

	for list, want := range map[string]string{
		"EU":                       `--clusters: cluster name "EU": want a lowercase DNS label`,
		"eu-1,eu-1=x":              "--clusters: cluster eu-1 named twice",
		"eu-1=":                    "--clusters: cluster eu-1: empty context after '='",
		"a-very-long-cluster-name": "at most 20 characters",
	} {
		_, err := Clusters{ClustersList: list}.Refs()
		require.Error(t, err, list)
		assert.Contains(t, err.Error(), want, list)
	}
	assert.Equal(t, "deployflow", ClusterTaskQueue("deployflow", ""), "the worker's own cluster keeps its task queue")
	assert.Equal(t, "deployflow@eu-1", ClusterTaskQueue("deployflow", "eu-1"))
}

// A cluster may have a kubeconfig file of its own (the chart mounts one
// Secret per cluster): its current context unless --clusters names one.
// A kubeconfig for a cluster not in --clusters, a missing file, or a
// malformed entry is refused, naming the flag.
func TestClusterKubeconfigsFlag(t *testing.T) {
	dir := t.TempDir()
	eu, us := filepath.Join(dir, "eu"), filepath.Join(dir, "us")
	for _, f := range []string{eu, us} {
		require.NoError(t, os.WriteFile(f, []byte("apiVersion: v1\nkind: Config\n"), 0o600))
	}
	refs, err := Clusters{ClustersList: "staging,eu-1,us-1=prod-us", ClusterKubeconfigs: "eu-1=" + eu + ", us-1=" + us}.Refs()
	require.NoError(t, err)
	assert.Equal(t, []ClusterRef{{Name: "staging", Context: "staging"}, {Name: "eu-1", Kubeconfig: eu}, {Name: "us-1", Context: "prod-us", Kubeconfig: us}}, refs)

	for kc, want := range map[string]string{
		"ap-1=" + eu:                      "--cluster-kubeconfigs: cluster ap-1 is not in --clusters",
		"eu-1=" + filepath.Join(dir, "x"): "--cluster-kubeconfigs: cluster eu-1: stat " + filepath.Join(dir, "x"),
		"eu-1":                            `--cluster-kubeconfigs: "eu-1": write NAME=PATH`,
		"eu-1=" + eu + ",eu-1=" + us:      "--cluster-kubeconfigs: cluster eu-1 given twice",
	} {
		_, err := Clusters{ClustersList: "eu-1", ClusterKubeconfigs: kc}.Refs()
		require.Error(t, err, kc)
		assert.Contains(t, err.Error(), want, kc)
	}
}

// A cluster may route its leases' hostnames its own way
// (--cluster-routing NAME=ingress|gateway: one cluster has no Gateway);
// the others route as the worker does. A cluster not in --clusters, a
// mode other than the two, or a cluster given twice is refused, and so is
// a cluster through a Gateway where the worker names none.
func TestClusterRoutingFlag(t *testing.T) {
	refs, err := Clusters{ClustersList: "eu-1,us-1", ClusterRouting: "eu-1=ingress"}.Refs()
	require.NoError(t, err)
	assert.Equal(t, []ClusterRef{{Name: "eu-1", Context: "eu-1", Routing: RoutingIngress}, {Name: "us-1", Context: "us-1"}}, refs)

	for routing, want := range map[string]string{
		"ap-1=ingress":              "--cluster-routing: cluster ap-1 is not in --clusters",
		"eu-1=nginx":                `--cluster-routing: "eu-1=nginx": write NAME=ingress or NAME=gateway`,
		"eu-1":                      `--cluster-routing: "eu-1": write NAME=ingress or NAME=gateway`,
		"eu-1=ingress,eu-1=gateway": "--cluster-routing: cluster eu-1 given twice",
	} {
		_, err := Clusters{ClustersList: "eu-1", ClusterRouting: routing}.Refs()
		require.Error(t, err, routing)
		assert.Contains(t, err.Error(), want, routing)
	}

	c := FromEnv()
	c.ClustersList, c.ClusterRouting = "eu-1", "eu-1=gateway"
	assert.ErrorContains(t, c.Validate(), "--cluster-routing: cluster eu-1 routes through a Gateway only where the worker does: add --routing gateway --gateway NAMESPACE/NAME")
	c.RoutingMode, c.GatewayName = RoutingGateway, "gateway-system/public"
	assert.NoError(t, c.Validate())
}

// Found in review: '@' in the worker's own task queue would read as a
// cluster's queue (<queue>@<cluster>); it is refused at start.
func TestATaskQueueWithAnAtIsRefused(t *testing.T) {
	c := FromEnv()
	c.TaskQueue = "deploy@prod"
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--task-queue "deploy@prod": '@' separates a task queue from its cluster's`)
}
