package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Temporal's production shape in the local stack (issue 22.1):
// DEPLOYFLOW_TEMPORAL=postgres runs the Temporal server binary (the version
// the pinned CLI embeds, built from the module proxy) on PostgreSQL
// (Debian's package) with DEPLOYFLOW_HISTORY_SHARDS history shards, its
// schema created by Temporal's own SQL tool, and the Temporal UI server, on
// the same addresses as the dev server. The default, "dev", is the CLI's
// dev server: SQLite and one history shard.
const (
	TemporalModeEnv  = "DEPLOYFLOW_TEMPORAL"
	HistoryShardsEnv = "DEPLOYFLOW_HISTORY_SHARDS"
	ModeDev          = "dev"
	ModePostgres     = "postgres"
	// DefaultHistoryShards is the postgres mode's shard count: enough that
	// a fleet of leases spreads over many shards, as on a provider's
	// cluster (Temporal's own default for new clusters is 512 or more).
	DefaultHistoryShards = 64

	// Postgres and TemporalUI are the postgres mode's extra processes; its
	// Temporal server keeps the component name Temporal.
	Postgres   = "postgres"
	TemporalUI = "temporal-ui"
	// TemporalServer and TemporalSQLTool are binaries (see Bin).
	TemporalServer  = "temporal-server"
	TemporalSQLTool = "temporal-sql-tool"

	postgresHost = "127.0.0.1"
	postgresPort = "15432"
	// TemporalMetricsURL is the postgres mode's Temporal server metrics
	// (Prometheus format): persistence, shard and task latencies.
	TemporalMetricsURL = "http://127.0.0.1:17000/metrics"
	temporalPprofPort  = 17936
)

// temporalMode reads DEPLOYFLOW_TEMPORAL and DEPLOYFLOW_HISTORY_SHARDS.
func temporalMode() (mode string, shards int, err error) {
	switch mode = os.Getenv(TemporalModeEnv); mode {
	case "", ModeDev:
		mode = ModeDev
	case ModePostgres:
	default:
		return "", 0, fmt.Errorf("%s=%q: want %s (the CLI's dev server, the default) or %s (the Temporal server on PostgreSQL)", TemporalModeEnv, mode, ModeDev, ModePostgres)
	}
	shards = DefaultHistoryShards
	if v := os.Getenv(HistoryShardsEnv); v != "" {
		if shards, err = strconv.Atoi(v); err != nil || shards < 1 || shards > 16384 {
			return "", 0, fmt.Errorf("%s=%q: want a number of history shards from 1 to 16384", HistoryShardsEnv, v)
		}
	}
	return mode, shards, nil
}

// Processes lists the stack's processes in start order for its Temporal
// mode (Components, with PostgreSQL and the UI server in postgres mode).
func (s *Stack) Processes() []string {
	if s.TemporalMode != ModePostgres {
		return Components
	}
	var out []string
	for _, c := range Components {
		if c == Temporal {
			out = append(out, Postgres, Temporal, TemporalUI)
			continue
		}
		out = append(out, c)
	}
	return out
}

// postgresBin is a binary of Debian's PostgreSQL server package (the newest
// installed major version).
func postgresBin(name string) string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name)
		}
	}
	return filepath.Join("/usr/lib/postgresql/15/bin", name) // reported missing by EnsureBinaries
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// postgresData is PostgreSQL's data directory: in the run directory, unless
// the stack runs as root, whom PostgreSQL refuses to run as; then the
// server runs as Debian's postgres user, and its data, which that user must
// reach, lives in /var/tmp, linked from the run directory.
func (s *Stack) postgresData() string {
	if os.Geteuid() != 0 {
		return filepath.Join(s.RunDir, "postgres")
	}
	return filepath.Join("/var/tmp", "deployflow-postgres-"+fmt.Sprint(fingerprintOf(s.RunDir)))
}

func fingerprintOf(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// postgresUser is the credential PostgreSQL runs as: nil (this user)
// unless the stack runs as root.
func postgresUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL will not run as root and there is no postgres user: install Debian's postgresql package (apt-get install postgresql): %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Stack) postgresComponent() component {
	cred, _ := postgresUser()
	data := s.postgresData()
	return component{
		process: process{name: Postgres, bin: postgresBin("postgres"), cred: cred, args: []string{
			"-D", data,
			"-h", postgresHost,
			"-p", postgresPort,
			"-k", data, // the Unix socket, beside the data
			"-c", "max_connections=400",
			"-c", "shared_buffers=256MB",
			// A throwaway dev database, as etcd here: durability is not
			// worth the fsyncs. Both sides of `make bench` run without them.
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			"-c", "log_min_messages=warning",
		}},
		before:  s.initPostgres,
		ready:   postgresReady,
		timeout: 60 * time.Second,
	}
}

// initPostgres creates the database cluster once (user temporal, trusted
// on loopback only: the server listens on 127.0.0.1 and its socket).
func (s *Stack) initPostgres(ctx context.Context) error {
	data := s.postgresData()
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
		return nil
	}
	cred, err := postgresUser()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(data, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
		link := filepath.Join(s.RunDir, "postgres")
		_ = os.Remove(link)
		if err := os.Symlink(data, link); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, postgresBin("initdb"), "-D", data, "-U", "temporal", "--auth=trust", "-E", "UTF8", "--no-instructions")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

func postgresReady(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, postgresBin("pg_isready"), "-h", postgresHost, "-p", postgresPort, "-U", "temporal").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_isready: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// temporalServerComponent is the Temporal server on PostgreSQL: all four
// services in one process, as the dev server runs them, but on a database
// with s.HistoryShards shards.
func (s *Stack) temporalServerComponent() component {
	root := filepath.Join(s.RunDir, "temporal-server")
	return component{
		process: process{name: Temporal, bin: s.Bin(TemporalServer), args: []string{
			"--root", root, "--config", "config", "--env", "development", "--allow-no-auth", "start",
		}},
		before:  s.prepareTemporalServer,
		ready:   temporalReady,
		after:   s.registerNamespace,
		timeout: 120 * time.Second,
	}
}

func (s *Stack) temporalUIComponent() component {
	root := filepath.Join(s.RunDir, "temporal-ui")
	return component{
		process: process{name: TemporalUI, bin: s.Bin(TemporalUI), args: []string{
			"--root", root, "--config", "config", "--env", "development", "start",
		}},
		before: func(context.Context) error {
			return writeFile(filepath.Join(root, "config", "development.yaml"), fmt.Sprintf(uiConfig, TemporalAddress, temporalUIPort))
		},
		ready:   httpOK(TemporalUIURL+"/api/v1/settings", "Auth"),
		timeout: 60 * time.Second,
	}
}

// prepareTemporalServer writes the server's configuration and creates its
// schema with Temporal's SQL tool (once: a marker in the run directory,
// removed with the data by Down).
func (s *Stack) prepareTemporalServer(ctx context.Context) error {
	root := filepath.Join(s.RunDir, "temporal-server")
	if err := writeFile(filepath.Join(root, "config", "development.yaml"), fmt.Sprintf(serverConfig,
		s.HistoryShards, postgresHost+":"+postgresPort, strings.Split(TemporalAddress, ":")[1], temporalPprofPort,
		strings.TrimSuffix(strings.TrimPrefix(TemporalMetricsURL, "http://"), "/metrics"),
		filepath.Join(root, "config", "dynamicconfig.yaml"))); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(root, "config", "dynamicconfig.yaml"), dynamicConfig); err != nil {
		return err
	}
	marker := filepath.Join(s.RunDir, "temporal-schema.done")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	schema := filepath.Join(filepath.Dir(s.Bin(TemporalSQLTool)), "schema", "postgresql", "v12")
	for _, db := range []struct{ name, dir string }{
		{"temporal", filepath.Join(schema, "temporal", "versioned")},
		{"temporal_visibility", filepath.Join(schema, "visibility", "versioned")},
	} {
		base := []string{"--plugin", "postgres12", "--ep", postgresHost, "-p", postgresPort, "-u", "temporal", "--db", db.name}
		for _, step := range [][]string{{"create-database"}, {"setup-schema", "-v", "0.0"}, {"update-schema", "-d", db.dir}} {
			cmd := exec.CommandContext(ctx, s.Bin(TemporalSQLTool), append(base, step...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("temporal-sql-tool %s %s: %w\n%s\n(a half-made schema: run `make dev-down` and start again)", db.name, step[0], err, out)
			}
		}
	}
	return os.WriteFile(marker, nil, 0o644)
}

// registerNamespace registers the default namespace (one day's retention,
// as the dev server's) and deployflow's search attributes, once, and waits
// until the frontend serves the namespace.
func (s *Stack) registerNamespace(ctx context.Context) error {
	c, err := client.DialContext(ctx, client.Options{HostPort: TemporalAddress, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        "default",
		WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace default: %w", err)
	}
	add := map[string]enumspb.IndexedValueType{}
	for _, sa := range s.searchAttributes {
		name, typ, _ := strings.Cut(sa, "=")
		t, ok := indexedTypes[typ]
		if !ok {
			return fmt.Errorf("search attribute %s: unknown type %q", name, typ)
		}
		add[name] = t
	}
	for {
		list, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
		if err == nil {
			for name := range list.GetCustomAttributes() {
				delete(add, name)
			}
			if len(add) == 0 {
				break
			}
			_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: "default", SearchAttributes: add})
			if err == nil {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("search attributes of namespace default: %w", err)
		case <-time.After(time.Second):
		}
	}
	// The namespace is served once a visibility query in it answers.
	for {
		_, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: "default"})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace default not served: %w", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

var indexedTypes = map[string]enumspb.IndexedValueType{
	"Keyword":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"KeywordList": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	"Int":         enumspb.INDEXED_VALUE_TYPE_INT,
	"Text":        enumspb.INDEXED_VALUE_TYPE_TEXT,
	"Bool":        enumspb.INDEXED_VALUE_TYPE_BOOL,
	"Datetime":    enumspb.INDEXED_VALUE_TYPE_DATETIME,
	"Double":      enumspb.INDEXED_VALUE_TYPE_DOUBLE,
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// serverConfig is the Temporal server's configuration: %d history shards,
// PostgreSQL at %s, the frontend on 127.0.0.1:%s (the dev server's port),
// pprof on %d, metrics on %s, dynamic config from %s. Every service binds
// loopback.
const serverConfig = `log:
  stdout: true
  level: warn
persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: %d
  datastores:
    default:
      sql:
        pluginName: postgres12
        databaseName: temporal
        connectAddr: %[2]s
        connectProtocol: tcp
        user: temporal
        maxConns: 40
        maxIdleConns: 40
        maxConnLifetime: 1h
    visibility:
      sql:
        pluginName: postgres12
        databaseName: temporal_visibility
        connectAddr: %[2]s
        connectProtocol: tcp
        user: temporal
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
  pprof:
    port: %[4]d
  metrics:
    prometheus:
      framework: tally
      timerType: histogram
      listenAddress: %[5]s
services:
  frontend:
    rpc:
      grpcPort: %[3]s
      membershipPort: 16933
      bindOnLocalHost: true
      httpPort: 17243
  matching:
    rpc:
      grpcPort: 17235
      membershipPort: 16935
      bindOnLocalHost: true
  history:
    rpc:
      grpcPort: 17234
      membershipPort: 16934
      bindOnLocalHost: true
  worker:
    rpc:
      grpcPort: 17239
      membershipPort: 16939
      bindOnLocalHost: true
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: 127.0.0.1:%[3]s
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: %[6]s
  pollInterval: 10s
`

// dynamicConfig enables what the stack's dev server enables (updates,
// update-with-start; search attributes visible at once, with the
// persistence rates the dev server raises for that).
const dynamicConfig = `frontend.enableUpdateWorkflowExecution:
  - value: true
frontend.enableExecuteMultiOperation:
  - value: true
system.forceSearchAttributesCacheRefreshOnRead:
  - value: true
frontend.persistenceMaxQPS:
  - value: 10000
history.persistenceMaxQPS:
  - value: 45000
frontend.namespaceRPS.visibility:
  - value: 100
history.hostLevelCacheMaxSize:
  - value: 8096
`

// uiConfig is the Temporal UI server's: the frontend at %s, served on
// 127.0.0.1:%s, as the dev server serves it.
const uiConfig = `temporalGrpcAddress: %s
host: 127.0.0.1
port: %s
enableUi: true
defaultNamespace: default
cors:
  cookieInsecure: true
  allowOrigins: []
auth:
  enabled: false
`
