package config

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlagsOverrideEnvironmentOverrideDefaults(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "temporal:7233")
	t.Setenv("DEPLOYFLOW_TASK_QUEUE", "")
	t.Setenv("TEMPORAL_NAMESPACE", "")
	t.Setenv("TEMPORAL_CONFIG_FILE", t.TempDir()+"/none.toml")
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--temporal-namespace", "prod", "--context", "staging"}))
	require.NoError(t, c.Resolve())

	assert.Equal(t, "temporal:7233", c.TemporalAddress, "env")
	assert.Equal(t, "prod", c.TemporalNamespace, "flag")
	assert.Equal(t, DefaultTaskQueue, c.TaskQueue, "an empty variable keeps the default")
	assert.Equal(t, "", c.Kubeconfig, "no --kubeconfig: kubectl's loading rules")
	assert.Equal(t, "staging", c.KubeContext)
	assert.Equal(t, DefaultMetricsAddress, c.MetricsAddress)
	assert.NoError(t, c.Validate())
}

func TestValidateNamesTheFlagAndTheFix(t *testing.T) {
	c := FromEnv()
	c.TemporalAddress = "localhost"
	c.LogLevel = "loud"
	c.LogFormat = "xml"
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--temporal-address "localhost": want host:port`)
	assert.Contains(t, err.Error(), `--log-level "loud": want debug, info, warn or error`)
	assert.Contains(t, err.Error(), `--log-format "xml": want text or json`)
}

// Issue 11.5: the worker's Temporal concurrency comes from flags or the
// environment; 0 keeps the SDK's default; bad values name the flag.
func TestTuningFromFlagsAndEnvironment(t *testing.T) {
	t.Setenv("DEPLOYFLOW_MAX_CONCURRENT_ACTIVITIES", "50")
	t.Setenv("DEPLOYFLOW_STICKY_CACHE_SIZE", "2000")
	t.Setenv("DEPLOYFLOW_KUBE_API_BURST", "300")
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--workflow-task-pollers", "4", "--kube-api-qps", "200"}))
	require.NoError(t, c.Resolve())
	assert.Equal(t, Tuning{MaxConcurrentActivities: 50, StickyCacheSize: 2000, WorkflowTaskPollers: 4, KubeAPIQPS: 200, KubeAPIBurst: 300}, c.Tuning)
	require.NoError(t, c.Validate())

	c.MaxConcurrentWorkflowTasks = 1
	c.ActivityTaskPollers = -1
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--max-concurrent-workflow-tasks 1: want 2 or more")
	assert.Contains(t, err.Error(), "--activity-task-pollers -1: want 0")

	// The Kubernetes rate limit defaults to 1000/s, burst 2000 (client-go's
	// own 5/s throttled a fleet's deploys in the client: issue 11; 50/s,
	// burst 100 still did: issue 22.3, make bench).
	t.Setenv("DEPLOYFLOW_KUBE_API_BURST", "")
	var d Config
	d.RegisterFlags(flag.NewFlagSet("d", flag.ContinueOnError))
	assert.Equal(t, DefaultKubeAPIQPS, d.KubeAPIQPS)
	assert.Equal(t, DefaultKubeAPIBurst, d.KubeAPIBurst)
	d.KubeAPIBurst = 10
	assert.ErrorContains(t, d.Validate(), "--kube-api-qps 1000, --kube-api-burst 10")

	// Issue 40.2: the workflow cache is sized for the work in flight, not
	// the SDK's 10,000 (a cached idle lease is about 0.1 MiB of every
	// worker: make bench); 0 still asks for the SDK's.
	t.Setenv("DEPLOYFLOW_STICKY_CACHE_SIZE", "")
	var e Config
	e.RegisterFlags(flag.NewFlagSet("e", flag.ContinueOnError))
	assert.Equal(t, DefaultStickyCacheSize, e.StickyCacheSize)
	assert.Equal(t, 2000, e.StickyCacheSize)
	t.Setenv("DEPLOYFLOW_STICKY_CACHE_SIZE", "0")
	var z Config
	z.RegisterFlags(flag.NewFlagSet("z", flag.ContinueOnError))
	assert.Zero(t, z.StickyCacheSize, "0: the SDK's default")
}

// Issue 35.3: the lease NetworkPolicy's flags are checked at start, each
// naming the flag and the form it wants; none empties a list.
func TestLeaseNetworkFlagsAreValidated(t *testing.T) {
	c := FromEnv()
	assert.NoError(t, c.Validate(), "the defaults are valid")
	assert.Equal(t, []string{"ingress-nginx"}, c.LeaseLimits.Namespace.IngressNamespaces())
	assert.Contains(t, c.LeaseLimits.Namespace.EgressDenied(), "169.254.0.0/16", "metadata addresses are denied by default")

	c.LeaseLimits.Namespace.IngressFrom = "ingress-nginx,Bad_NS"
	c.LeaseLimits.Namespace.EgressDeny = "10.0.0.0/8,10.0.0.0"
	c.LeaseLimits.Namespace.EgressAllow = "proxy.example.com"
	c.LeaseLimits.Namespace.DNS = "kube-system"
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--lease-ingress-from "Bad_NS": want namespace names`)
	assert.Contains(t, err.Error(), `--lease-egress-deny "10.0.0.0": want address ranges`)
	assert.Contains(t, err.Error(), `--lease-egress-allow "proxy.example.com": want address ranges`)
	assert.Contains(t, err.Error(), `--lease-dns "kube-system": want namespace/label=value`)

	c = FromEnv()
	c.LeaseLimits.Namespace.IngressFrom, c.LeaseLimits.Namespace.EgressDeny = None, None
	assert.NoError(t, c.Validate())
	assert.Empty(t, c.LeaseLimits.Namespace.IngressNamespaces())
	assert.Empty(t, c.LeaseLimits.Namespace.EgressDenied())
}

// What a manifest may ask for follows the namespace's profile: its Pod
// Security level, the capabilities it may add back, its NodePort quota (0
// is none, not the default: issue 35.5's review).
func TestManifestLimitsFollowTheLeaseNamespacesProfile(t *testing.T) {
	c := FromEnv()
	m := c.LeaseLimits.ManifestLimits()
	assert.Equal(t, "baseline", m.PodSecurity)
	assert.Equal(t, []string{"NET_BIND_SERVICE", "CHOWN", "SETUID", "SETGID"}, m.Capabilities)
	assert.Equal(t, 16, m.NodePorts)

	c.LeaseLimits.Namespace.PodSecurity = "restricted"
	c.LeaseLimits.Namespace.QuotaNodePorts = "0"
	c.LeaseLimits.AllowCapabilities = None
	m = c.LeaseLimits.ManifestLimits()
	assert.Equal(t, "restricted", m.PodSecurity)
	assert.Empty(t, m.Capabilities)
	assert.NotNil(t, m.Capabilities, "none, not the default")
	assert.Equal(t, 0, m.OrDefaults().NodePorts, "a quota of none, not the default")
	assert.NoError(t, c.Validate())

	c.LeaseLimits.AllowCapabilities = "NET_BIND_SERVICE,CAP_SYS_ADMIN"
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--allow-capabilities: "CAP_SYS_ADMIN": want capability names without CAP_`)
}

// Where the cluster's load balancer reaches pods directly, a declared IP
// endpoint's ports take no NodePorts, so no NodePort quota bounds them.
func TestLoadBalancersWithoutNodePortsLiftTheNodePortLimit(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--lease-quota-nodeports", "0", "--lease-loadbalancers-without-nodeports"}))
	assert.True(t, c.LeaseLimits.Namespace.LoadBalancersWithoutNodePorts)
	assert.Greater(t, c.LeaseLimits.ManifestLimits().OrDefaults().NodePorts, 1000)
}

// Issue 35.5's review: the Services and ReplicaSets quotas must hold what
// a lease within the --max-* limits writes, or a plan that passes fails at
// its apply with "exceeded quota". The defaults do; a --max-services
// raised past them is refused at start, naming both flags.
func TestObjectQuotasHoldWhatTheManifestLimitsAllow(t *testing.T) {
	c := FromEnv()
	require.NoError(t, c.Validate())
	c.LeaseLimits.Manifest.Services = 40
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--lease-quota-services 64: a lease within --max-services 40 and --max-ip-endpoints 4 may need 84 Services")
	assert.Contains(t, err.Error(), "--lease-quota-replicasets 1024: a lease within --max-services 40 may keep 2080 ReplicaSets")
	c.LeaseLimits.Namespace.QuotaServices, c.LeaseLimits.Namespace.QuotaReplicaSets = "84", "2080"
	assert.NoError(t, c.Validate())
}

// Issue 37.2: the GPUs a provider offers are a flag (--gpu-models), parsed
// and validated at start, and the namespace's GPU quota must hold what a
// lease within --max-gpus runs.
func TestGPUFlagsAreValidatedAndReachTheManifestLimits(t *testing.T) {
	c := FromEnv()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.LeaseLimits.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--gpu-models", "nvidia/a100, nvidia/h100,amd/*", "--max-gpus", "4"}))
	require.NoError(t, c.Validate())
	m := c.LeaseLimits.ManifestLimits()
	assert.Equal(t, []string{"nvidia/a100", "nvidia/h100", "amd/*"}, m.GPUModels)
	assert.Equal(t, 4, m.GPUs)

	c.LeaseLimits.GPUModels = "nvidia/A100"
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--gpu-models "nvidia/A100": the model is a node label value`)
	c.LeaseLimits.GPUModels = "intel/arc"
	assert.ErrorContains(t, c.Validate(), `--gpu-models "intel/arc": want vendor/model or vendor/*, the vendor nvidia or amd`)

	c.LeaseLimits.GPUModels = "nvidia/a100"
	c.LeaseLimits.Manifest.GPUs = 32
	assert.ErrorContains(t, c.Validate(), "--lease-quota-gpus 16: a lease within --max-gpus 32 could not run its pods")
	c.LeaseLimits.Namespace.QuotaGPUs = "40"
	assert.NoError(t, c.Validate())
}

// Issue 39.1: the storage a provider offers is a flag (--storage-classes,
// --max-storage), validated at start, and the namespace's storage quota
// must hold what a lease within --max-storage claims.
func TestStorageFlagsAreValidatedAndReachTheManifestLimits(t *testing.T) {
	// The flags' defaults, whatever the environment says (the local
	// stack's offers its StorageClass: CI run 65).
	t.Setenv("DEPLOYFLOW_STORAGE_CLASSES", "")
	t.Setenv("DEPLOYFLOW_MAX_STORAGE", "")
	c := FromEnv()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.LeaseLimits.RegisterFlags(fs)
	require.NoError(t, fs.Parse(nil))
	require.NoError(t, c.Validate())
	m := c.LeaseLimits.ManifestLimits()
	assert.Empty(t, m.StorageClasses, "none unless the operator lists some")
	assert.Equal(t, "100Gi", m.Storage)

	require.NoError(t, fs.Parse([]string{"--storage-classes", "local, fast-ssd", "--max-storage", "50Gi"}))
	require.NoError(t, c.Validate())
	m = c.LeaseLimits.ManifestLimits()
	assert.Equal(t, []string{"local", "fast-ssd"}, m.StorageClasses)
	assert.Equal(t, "50Gi", m.Storage)

	c.LeaseLimits.StorageClasses = "Fast_SSD"
	assert.ErrorContains(t, c.Validate(), `--storage-classes "Fast_SSD": want StorageClass names`)
	c.LeaseLimits.StorageClasses = "local"
	c.LeaseLimits.Manifest.Storage = "lots"
	assert.ErrorContains(t, c.Validate(), `--max-storage "lots": want a Kubernetes quantity`)
	c.LeaseLimits.Manifest.Storage = "-1Gi"
	assert.ErrorContains(t, c.Validate(), "--max-storage -1Gi: want 0 or more")
	c.LeaseLimits.Manifest.Storage = "1Ti"
	assert.ErrorContains(t, c.Validate(), "--lease-quota-storage 100Gi: a lease within --max-storage 1Ti could not claim its volumes")
	c.LeaseLimits.Namespace.QuotaStorage = "1Ti"
	assert.NoError(t, c.Validate())
}

// Issue 37.3: a worker keeps secrets only with the codec's keys, and
// says so to every check of a manifest (the deploy's plan and a
// placement's), from one place.
func TestSecretsAreAllowedOnlyWithTheCodecsKeys(t *testing.T) {
	c := FromEnv()
	c.CodecKeysFile = ""
	assert.False(t, c.ManifestLimits().Secrets)
	c.CodecKeysFile = "/etc/deployflow/codec/keys.json"
	assert.True(t, c.ManifestLimits().Secrets)
}

// Issue 40.1: a worker sends DefaultObserverSenders observations at once
// (four, before, took a burst of 500 changes minutes on a loaded
// PostgreSQL server: make bench-scale); the flag and its variable set it,
// and a value out of range names the flag and a fix.
func TestObserverSendersFromFlagsAndEnvironment(t *testing.T) {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("c", flag.ContinueOnError))
	assert.Equal(t, 32, c.ObserverSenders)

	t.Setenv("DEPLOYFLOW_OBSERVER_SENDERS", "8")
	var d Config
	fs := flag.NewFlagSet("d", flag.ContinueOnError)
	d.RegisterFlags(fs)
	assert.Equal(t, 8, d.ObserverSenders)
	require.NoError(t, fs.Parse([]string{"--observer-senders", "0"}))
	assert.ErrorContains(t, d.Validate(), "--observer-senders 0: want 1 to 1000, such as 32 (env DEPLOYFLOW_OBSERVER_SENDERS)")
}
