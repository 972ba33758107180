#!/usr/bin/env bash
# Builds the local dev stack's binaries into the cache, once per pinned version.
#   hack/build-tools.sh            build whatever is missing
#   hack/build-tools.sh --print    print the binary directories
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
cache=${DEPLOYFLOW_CACHE:-$HOME/.cache/deployflow}
k8s_dir=$cache/kubernetes-$KUBERNETES_VERSION
etcd_dir=$cache/etcd-$ETCD_VERSION
kwok_dir=$cache/kwok-$KWOK_VERSION
temporal_dir=$cache/temporal-$TEMPORAL_CLI_VERSION
helm_dir=$cache/helm-$HELM_VERSION
prometheus_dir=$cache/prometheus-$PROMETHEUS_VERSION
traefik_dir=$cache/traefik-$TRAEFIK_VERSION
gateway_api_dir=$cache/gateway-api-$GATEWAY_API_VERSION
temporal_server_dir=$cache/temporal-server-$TEMPORAL_SERVER_VERSION
temporal_ui_dir=$cache/temporal-ui-$TEMPORAL_UI_VERSION
gotestsum_dir=$cache/gotestsum-$GOTESTSUM_VERSION

if [ "${1:-}" = "--print" ]; then
  printf '%s\n' "$k8s_dir" "$etcd_dir" "$kwok_dir" "$temporal_dir" "$helm_dir" "$prometheus_dir" "$traefik_dir" "$gateway_api_dir"
  [ "${DEPLOYFLOW_TEMPORAL:-}" = postgres ] && printf '%s\n' "$temporal_server_dir" "$temporal_ui_dir"
  exit 0
fi

log() { echo "build-tools: $*" >&2; }

# One build at a time per cache: `make tools` and a test's stack start may
# both find a binary missing; the second waits, then finds it built.
mkdir -p "$cache"
exec 9>"$cache/build-tools.lock"
flock 9

# build DIR NAME... : builds the listed binaries only when one is missing.
need() { local d=$1; shift; for b in "$@"; do [ -x "$d/$b" ] || return 0; done; return 1; }

if need "$k8s_dir" kube-apiserver kube-controller-manager kube-scheduler kubectl; then
  log "building Kubernetes $KUBERNETES_VERSION into $k8s_dir (a few minutes on a cold cache)"
  minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  ldflags=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p "$k8s_dir.tmp"
  (cd "$here/tools" && for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
     go build -trimpath -ldflags "-s -w $ldflags" -o "$k8s_dir.tmp/$c" "k8s.io/kubernetes/cmd/$c"
   done)
  rm -rf "$k8s_dir"; mv "$k8s_dir.tmp" "$k8s_dir"
fi

if need "$etcd_dir" etcd; then
  log "building etcd $ETCD_VERSION into $etcd_dir"
  mkdir -p "$etcd_dir.tmp"
  (cd "$here/tools" && go build -trimpath -ldflags "-s -w" -o "$etcd_dir.tmp/etcd" go.etcd.io/etcd/server/v3)
  rm -rf "$etcd_dir"; mv "$etcd_dir.tmp" "$etcd_dir"
fi

if need "$kwok_dir" kwok; then
  log "building kwok $KWOK_VERSION into $kwok_dir"
  mkdir -p "$kwok_dir.tmp"
  GOBIN="$kwok_dir.tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  rm -rf "$kwok_dir"; mv "$kwok_dir.tmp" "$kwok_dir"
fi

if need "$temporal_dir" temporal; then
  log "building the Temporal CLI $TEMPORAL_CLI_VERSION into $temporal_dir"
  mkdir -p "$temporal_dir.tmp"
  # Pinned to a release whose go.mod has no replace directive: later ones
  # (v1.9.x) replace ./cliext, which `go install pkg@version` refuses and
  # whose module zip leaves out.
  GOBIN="$temporal_dir.tmp" go install -trimpath -ldflags "-s -w" "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION"
  rm -rf "$temporal_dir"; mv "$temporal_dir.tmp" "$temporal_dir"
fi

if need "$helm_dir" helm; then
  log "building helm $HELM_VERSION into $helm_dir"
  mkdir -p "$helm_dir.tmp"
  GOBIN="$helm_dir.tmp" go install -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
  rm -rf "$helm_dir"; mv "$helm_dir.tmp" "$helm_dir"
fi

if need "$prometheus_dir" prometheus; then
  log "building Prometheus $PROMETHEUS_VERSION into $prometheus_dir (a few minutes on a cold cache)"
  mkdir -p "$prometheus_dir.tmp"
  # The module version v0.N.M is Prometheus 3.N.M. Built without the web
  # UI's assets: canary analyses use the HTTP API only.
  GOBIN="$prometheus_dir.tmp" go install -trimpath -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION"
  rm -rf "$prometheus_dir"; mv "$prometheus_dir.tmp" "$prometheus_dir"
fi

if need "$traefik_dir" traefik; then
  log "building Traefik $TRAEFIK_VERSION into $traefik_dir (a few minutes on a cold cache)"
  # Its go.mod replaces two modules with forks, which `go install
  # module@version` refuses: built inside a copy of the module instead.
  src=$(go mod download -json "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  rm -rf "$traefik_dir.tmp"; mkdir -p "$traefik_dir.tmp/src"
  cp -r "$src/." "$traefik_dir.tmp/src/"; chmod -R u+w "$traefik_dir.tmp/src"
  (cd "$traefik_dir.tmp/src" && go build -mod=mod -trimpath -ldflags "-s -w" -o "$traefik_dir.tmp/traefik" ./cmd/traefik)
  rm -rf "$traefik_dir.tmp/src"
  rm -rf "$traefik_dir"; mv "$traefik_dir.tmp" "$traefik_dir"
fi

if [ ! -d "$gateway_api_dir/crds" ]; then
  log "copying the Gateway API $GATEWAY_API_VERSION CRDs (standard channel) into $gateway_api_dir"
  src=$(go mod download -json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  rm -rf "$gateway_api_dir.tmp"; mkdir -p "$gateway_api_dir.tmp/crds"
  cp "$src"/config/crd/standard/*.yaml "$gateway_api_dir.tmp/crds/"; chmod u+w "$gateway_api_dir.tmp/crds/"*.yaml
  rm -rf "$gateway_api_dir"; mv "$gateway_api_dir.tmp" "$gateway_api_dir"
fi

if need "$gotestsum_dir" gotestsum; then
  log "building gotestsum $GOTESTSUM_VERSION into $gotestsum_dir"
  mkdir -p "$gotestsum_dir.tmp"
  GOBIN="$gotestsum_dir.tmp" go install -trimpath -ldflags "-s -w" "gotest.tools/gotestsum@$GOTESTSUM_VERSION"
  rm -rf "$gotestsum_dir"; mv "$gotestsum_dir.tmp" "$gotestsum_dir"
fi

# DEPLOYFLOW_TEMPORAL=postgres: the Temporal server, its SQL tool with the
# schema it applies, and the UI server, at the versions the CLI embeds.
if [ "${DEPLOYFLOW_TEMPORAL:-}" = postgres ]; then
  if need "$temporal_server_dir" temporal-server temporal-sql-tool; then
    log "building the Temporal server $TEMPORAL_SERVER_VERSION into $temporal_server_dir"
    rm -rf "$temporal_server_dir.tmp"; mkdir -p "$temporal_server_dir.tmp"
    GOBIN="$temporal_server_dir.tmp" go install -trimpath -ldflags "-s -w" \
      "go.temporal.io/server/cmd/server@$TEMPORAL_SERVER_VERSION" "go.temporal.io/server/cmd/tools/sql@$TEMPORAL_SERVER_VERSION"
    mv "$temporal_server_dir.tmp/server" "$temporal_server_dir.tmp/temporal-server"
    mv "$temporal_server_dir.tmp/sql" "$temporal_server_dir.tmp/temporal-sql-tool"
    src=$(go env GOMODCACHE)/go.temporal.io/server@$TEMPORAL_SERVER_VERSION/schema/postgresql
    mkdir -p "$temporal_server_dir.tmp/schema"
    cp -r "$src" "$temporal_server_dir.tmp/schema/"
    chmod -R u+w "$temporal_server_dir.tmp/schema"
    rm -rf "$temporal_server_dir"; mv "$temporal_server_dir.tmp" "$temporal_server_dir"
  fi
  if need "$temporal_ui_dir" temporal-ui-server; then
    log "building the Temporal UI server $TEMPORAL_UI_VERSION into $temporal_ui_dir"
    rm -rf "$temporal_ui_dir.tmp"; mkdir -p "$temporal_ui_dir.tmp"
    GOBIN="$temporal_ui_dir.tmp" go install -trimpath -ldflags "-s -w" "github.com/temporalio/ui-server/v2/cmd/server@$TEMPORAL_UI_VERSION"
    mv "$temporal_ui_dir.tmp/server" "$temporal_ui_dir.tmp/temporal-ui-server"
    rm -rf "$temporal_ui_dir"; mv "$temporal_ui_dir.tmp" "$temporal_ui_dir"
  fi
fi
