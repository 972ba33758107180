#!/usr/bin/env bash
# demo.sh: the main job on the local stack (make demo runs `make dev-up`
# first). Starts a deployflow worker in the background (PID recorded beside
# the stack's, so `make dev-down` stops it too), then deploys a two-service
# lease with a hostname and an IP endpoint, asks its hostname through the
# stack's Gateway, rolls an image update out, asks again, and prints the
# result; then deploys a lease to two clusters in two waves.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bin/devstack env)"
run=$DEPLOYFLOW_CACHE/run
pidfile=$run/pids/worker.pid
worker_bin=$(readlink -f bin/deployflow-worker)

# A worker from an earlier demo may run an older build: replace it.
if [ -f "$pidfile" ]; then
  old=$(head -n1 "$pidfile")
  # (a rebuilt binary reads as "<path> (deleted)" in /proc: still ours)
  exe=$(readlink /proc/"$old"/exe 2>/dev/null || true)
  if [ "$exe" = "$worker_bin" ] || [ "$exe" = "$worker_bin (deleted)" ]; then
    kill -TERM "$old" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
fi
# A second cluster beside the stack's own (issue 23): its own API server,
# controller-manager, scheduler and kwok nodes, named demo-eu in the stack's
# kubeconfig.
bin/devstack cluster-up demo-eu 4 >/dev/null
# deployflow's CRDs in both, and kubectl's discovery cache refreshed so
# that `kubectl get deployflow` below knows them (hack/install-crds.sh).
hack/install-crds.sh "$(kubectl config current-context)" demo-eu
# Hostnames as HTTPRoutes on the stack's Gateway (Traefik), whose requests
# reach the fake pods through the data plane; where the data plane is off
# (it needs root for its route: docs/local-stack.md), the lease's Ingress.
# demo-eu runs no Gateway: its leases keep their Ingress (--cluster-routing).
routing=()
gateway=false
if [ "$(curl -fsS http://127.0.0.1:16480/healthz 2>/dev/null)" = on ]; then
  routing=(--routing gateway --gateway deployflow-gateway/deployflow --gateway-listener http --cluster-routing demo-eu=ingress)
  gateway=true
fi
setsid "$worker_bin" --kubeconfig "$KUBECONFIG" --clusters demo-eu "${routing[@]}" >"$run/logs/worker.log" 2>&1 < /dev/null &
printf '%s\n%s\n' "$!" "$worker_bin" > "$pidfile"
echo "demo: worker started (pid $!, metrics on http://127.0.0.1:9464/metrics, log $run/logs/worker.log)"
for _ in $(seq 1 100); do
  curl -fsS http://127.0.0.1:9464/readyz >/dev/null 2>&1 && break
  sleep 0.1
done

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
# ask IMAGE: a request for the shop's hostname through the Gateway, until a
# pod of IMAGE answers it (the proxy takes the new endpoints a moment after
# the rollout ends), then printed.
ask() {
  local out=""
  for _ in $(seq 1 100); do
    out=$(curl -sS --max-time 2 -H 'Host: shop.demo.example.com' http://127.0.0.1:18000/ 2>&1 || true)
    case $out in *"image $1"*) break ;; esac
    sleep 0.1
  done
  printf '\n\033[1m$ curl -H "Host: shop.demo.example.com" http://127.0.0.1:18000/\033[0m\n%s\n' "$out"
  case $out in *"image $1"*) ;; *) echo "demo: the Gateway never answered from a pod of $1" >&2; return 1 ;; esac
}
step bin/deployflow lease create demo-shop --owner acme
step bin/deployflow deploy -f examples/shop.yaml --wait
if $gateway; then ask nginx:1.26; fi
step bin/deployflow deploy -f examples/shop-v2.yaml --wait
if $gateway; then
  ask nginx:1.27
  step kubectl get rs,svc,httproute -n lease-demo-shop
else
  step kubectl get rs,svc,ingress -n lease-demo-shop
fi
step kubectl get deployflow
step bin/deployflow status demo-shop
# One lease in two clusters, wave by wave.
step bin/deployflow lease create demo-fleet --owner acme
step bin/deployflow deploy -f examples/fleet.yaml --plan
step bin/deployflow deploy -f examples/fleet.yaml --wait
step kubectl --context demo-eu get rs -n lease-demo-fleet
echo
echo "demo: the lease's workflow in the Temporal UI: http://127.0.0.1:8233/namespaces/default/workflows/deploy-demo-shop"
echo "demo: tear a lease down with 'bin/deployflow teardown demo-shop'; stop everything with 'make dev-down'"
echo "demo: done. Next: 'make test' runs the whole suite on this stack (the demo's worker and leases keep running)."
