package devstack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"k8s.io/client-go/kubernetes"
)

type component struct {
	process
	// before runs before the process starts (data directories, schemas);
	// after, once it is ready (registrations).
	before, after func(context.Context) error
	ready         func(context.Context) error
	timeout       time.Duration
}

func (s *Stack) component(name string) component {
	pki := func(f string) string { return filepath.Join(s.RunDir, "pki", f) }
	kubeconfig := s.Kubeconfig()
	switch name {
	case Etcd:
		return component{
			process: process{name: Etcd, bin: s.Bin(Etcd), args: []string{
				"--name=deployflow-dev",
				"--data-dir=" + filepath.Join(s.RunDir, "etcd"),
				"--listen-client-urls=" + EtcdClientURL,
				"--advertise-client-urls=" + EtcdClientURL,
				"--listen-peer-urls=" + etcdPeerURL,
				"--initial-advertise-peer-urls=" + etcdPeerURL,
				"--initial-cluster=deployflow-dev=" + etcdPeerURL,
				"--listen-metrics-urls=",
				// A throwaway dev cluster: durability is not worth the fsyncs.
				"--unsafe-no-fsync",
				// etcd's recommended maximum, not its 2 GiB default: make
				// bench-scale's 20,000 leases (a namespace, its policies,
				// Service, ReplicaSet, pod and their events each) must not
				// turn the cluster read-only ("database space exceeded").
				"--quota-backend-bytes=8589934592",
				"--log-level=warn",
			}},
			ready:   httpOK(EtcdClientURL+"/health", `"health":"true"`),
			timeout: 30 * time.Second,
		}
	case APIServer:
		return component{
			process: process{name: APIServer, bin: s.Bin(APIServer), args: []string{
				"--etcd-servers=" + EtcdClientURL,
				"--bind-address=127.0.0.1",
				"--advertise-address=127.0.0.1",
				"--secure-port=" + apiServerPort,
				// The loopback advertise address cannot be reconciled into the
				// kubernetes Service's endpoints; nothing here needs them.
				"--endpoint-reconciler-type=none",
				"--authorization-mode=RBAC",
				// Nothing here would remove the node.kubernetes.io/not-ready taint.
				"--disable-admission-plugins=TaintNodesByCondition",
				"--client-ca-file=" + pki("ca.crt"),
				"--tls-cert-file=" + pki("apiserver.crt"),
				"--tls-private-key-file=" + pki("apiserver.key"),
				"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
				"--service-account-key-file=" + pki("sa.pub"),
				"--service-account-signing-key-file=" + pki("sa.key"),
				"--service-cluster-ip-range=" + ServiceCIDR,
				"--profiling=false",
				"--v=0",
				// One line per request, by user agent: make bench counts the
				// requests each rollout driver makes.
				"--audit-policy-file=" + s.auditPolicy(),
				"--audit-log-path=" + s.AuditLog(),
				"--audit-log-format=json",
				"--audit-log-maxsize=100",
				"--audit-log-maxbackup=1",
			}},
			ready:   s.kubeHealth("/readyz"),
			timeout: 60 * time.Second,
		}
	case ControllerManager:
		return component{
			process: process{name: ControllerManager, bin: s.Bin(ControllerManager), args: append(kcmRateLimit(), []string{
				"--kubeconfig=" + kubeconfig,
				"--authentication-kubeconfig=" + kubeconfig,
				"--authorization-kubeconfig=" + kubeconfig,
				"--controllers=" + Controllers,
				// The StorageClass's provisioner: a directory under
				// /tmp/hostpath_pv per claim (StorageClass).
				"--enable-hostpath-provisioner=true",
				"--leader-elect=false",
				"--bind-address=127.0.0.1",
				"--secure-port=" + kcmPort,
				"--service-account-private-key-file=" + pki("sa.key"),
				"--root-ca-file=" + pki("ca.crt"),
				"--use-service-account-credentials=false",
				"--profiling=false",
			}...), restart: true},
			ready:   httpOK("https://127.0.0.1:"+kcmPort+"/healthz", "ok"),
			timeout: 60 * time.Second,
		}
	case Scheduler:
		return component{
			process: process{name: Scheduler, bin: s.Bin(Scheduler), args: []string{
				"--kubeconfig=" + kubeconfig,
				"--authentication-kubeconfig=" + kubeconfig,
				"--authorization-kubeconfig=" + kubeconfig,
				"--leader-elect=false",
				"--bind-address=127.0.0.1",
				"--secure-port=" + schedulerPort,
				"--profiling=false",
			}, restart: true},
			ready:   httpOK("https://127.0.0.1:"+schedulerPort+"/healthz", "ok"),
			timeout: 60 * time.Second,
		}
	case Kwok:
		return component{
			process: process{name: Kwok, bin: s.Bin(Kwok), args: []string{
				"--kubeconfig=" + kubeconfig,
				"--config=" + filepath.Join(s.RepoDir, "k8s", "kwok", "stages.yaml"),
				"--manage-all-nodes=false",
				"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
				"--cidr=" + PodCIDR,
				"--node-ip=127.0.0.1",
				"--server-address=",
			}, env: []string{"HOME=" + filepath.Join(s.RunDir, "kwok")}},
			// kwok has no health endpoint of its own; it is ready when it
			// has run a pod (bootstrap, kwok.go).
			ready:   s.kubeHealth("/readyz"),
			timeout: 30 * time.Second,
		}
	case DataPlane:
		return s.dataPlaneComponent()
	case Gateway:
		return s.gatewayComponent()
	case Postgres:
		return s.postgresComponent()
	case TemporalUI:
		return s.temporalUIComponent()
	case Temporal:
		if s.TemporalMode == ModePostgres {
			return s.temporalServerComponent()
		}
		args := []string{
			"server", "start-dev",
			"--ip=127.0.0.1",
			"--port=" + strings.Split(TemporalAddress, ":")[1],
			"--ui-port=" + temporalUIPort,
			"--db-filename=" + filepath.Join(s.RunDir, "temporal.db"),
			"--namespace=default",
			"--log-level=warn",
			// SQLite's write-ahead log: readers do not wait for the writer,
			// and a commit is not an fsync of the database (synchronous=normal
			// is durable across a crash of the server process, which the
			// fault-injection suite does; not across a crash of the machine).
			// Without it, 500 deploys started at once time out a sixth to a third of
			// their workflow starts (the SDK's 10s deadline) on this machine.
			"--sqlite-pragma=journal_mode=wal",
			"--sqlite-pragma=synchronous=normal",
			// Updates and Update-with-Start. The UI's Start Workflow form is
			// enabled by default on the dev server.
			"--dynamic-config-value=frontend.enableExecuteMultiOperation=true",
			"--dynamic-config-value=frontend.enableUpdateWorkflowExecution=true",
		}
		for _, sa := range s.searchAttributes {
			args = append(args, "--search-attribute="+sa)
		}
		return component{
			process: process{name: Temporal, bin: s.Bin(Temporal), args: args},
			ready:   temporalReady,
			timeout: 90 * time.Second,
		}
	case Prometheus:
		return component{
			process: process{name: Prometheus, bin: s.Bin(Prometheus), args: []string{
				"--config.file=" + s.prometheusConfig(),
				"--storage.tsdb.path=" + filepath.Join(s.RunDir, "prometheus", "data"),
				"--storage.tsdb.retention.time=2h",
				"--web.listen-address=" + prometheusAddr,
				"--log.level=warn",
			}},
			ready:   httpOK(PrometheusURL+"/-/ready", "Ready"),
			timeout: 60 * time.Second,
		}
	}
	panic("devstack: unknown component " + name)
}

// auditPolicy logs every request's metadata once, when it completes.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
`

func (s *Stack) auditPolicy() string { return filepath.Join(s.RunDir, "audit-policy.yaml") }

// prometheusConfig scrapes, every second, the targets listed in the JSON
// files of PrometheusTargets (file service discovery, re-read every
// second): a test adds its own target by writing a file there.
const prometheusConfig = `global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: targets
    file_sd_configs:
      - files: ["%s/*.json"]
        refresh_interval: 1s
`

func (s *Stack) prometheusConfig() string {
	return filepath.Join(s.RunDir, "prometheus", "prometheus.yml")
}

// PrometheusTargets is the directory of Prometheus's scrape targets: a
// JSON file there of [{"targets": ["127.0.0.1:port"], "labels": {...}}]
// is scraped within a few seconds.
func (s *Stack) PrometheusTargets() string { return filepath.Join(s.RunDir, "prometheus", "targets") }

// AuditLog is the kube-apiserver's audit log (JSON lines).
func (s *Stack) AuditLog() string { return filepath.Join(s.RunDir, "logs", "audit.log") }

// httpOK checks that url answers 200 with body containing want. The stack's
// own serving certificates are self-signed, so verification is skipped for
// these loopback health checks only.
func httpOK(url, want string) func(context.Context) error {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health check
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			return fmt.Errorf("%s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
		}
		return nil
	}
}

func (s *Stack) kubeHealth(path string) func(context.Context) error {
	return s.kubeHealthOf(s.Kubeconfig(), path)
}

// kubeHealthOf asks the API server of a kubeconfig for a health path.
func (s *Stack) kubeHealthOf(kubeconfig, path string) func(context.Context) error {
	return func(ctx context.Context) error {
		cs, err := clientsetOf(kubeconfig)
		if err != nil {
			return err
		}
		b, err := cs.Discovery().RESTClient().Get().AbsPath(path).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if strings.TrimSpace(string(b)) != "ok" {
			return fmt.Errorf("%s: %s", path, b)
		}
		return nil
	}
}

func temporalReady(ctx context.Context) error {
	c, err := client.DialContext(ctx, client.Options{HostPort: TemporalAddress, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return err
	}
	_, err = c.WorkflowService().GetSystemInfo(ctx, nil)
	return err
}

// Clientset is an admin client of the local cluster.
func (s *Stack) Clientset() (kubernetes.Interface, error) { return clientsetOf(s.Kubeconfig()) }

// kubeconfigFor is an admin kubeconfig of the API server at url, its
// cluster and context named name.
func (s *Stack) kubeconfigFor(name, url string) []byte {
	pki := filepath.Join(s.RunDir, "pki")
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority: %[3]s
users:
- name: deployflow-admin
  user:
    client-certificate: %[4]s
    client-key: %[5]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: deployflow-admin
    namespace: default
current-context: %[1]s
`, name, url, filepath.Join(pki, "ca.crt"), filepath.Join(pki, "admin.crt"), filepath.Join(pki, "admin.key")))
}

// replaceFile replaces path's content in one rename: a reader (kubectl, a
// test binary starting beside) never sees half of it, nor an empty file.
// Writers side by side (runs that share an extra cluster start it at once)
// each write a temporary file of their own: with one name for all, one's
// rename took the other's file, whose rename then failed.
func replaceFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.new")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// KCMAPIQPSEnv lifts kube-controller-manager's own client rate limit (its
// --kube-api-qps, default 20 a second, burst 30) to this many requests a
// second, burst twice that, for the stack's controller-managers (the
// bench's native deployment controller included): make bench's figures
// with the limit lifted show each side's own cost, not the limit both share.
const KCMAPIQPSEnv = "DEPLOYFLOW_KCM_API_QPS"

func kcmRateLimit() []string {
	q, err := strconv.Atoi(os.Getenv(KCMAPIQPSEnv))
	if err != nil || q <= 0 {
		return nil
	}
	return []string{"--kube-api-qps=" + strconv.Itoa(q), "--kube-api-burst=" + strconv.Itoa(2*q)}
}
