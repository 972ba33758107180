#!/usr/bin/env bash
# demo.sh: the main job on the local stack (make demo runs `make dev-up`
# first). Starts a deployflow worker in the background (PID recorded beside
# the stack's, so `make dev-down` stops it too), rolls a service out through
# a Temporal workflow, and shows the result in Kubernetes and in the UI.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bin/devstack env)"
run=$DEPLOYFLOW_CACHE/run
pidfile=$run/pids/worker.pid
worker_bin=$(readlink -f bin/deployflow-worker)

# A worker from an earlier demo may run an older build: replace it.
if [ -f "$pidfile" ]; then
  old=$(head -n1 "$pidfile")
  if [ "$(readlink -f /proc/"$old"/exe 2>/dev/null || true)" = "$worker_bin" ]; then
    kill -TERM "$old" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
fi
setsid "$worker_bin" --kubeconfig "$KUBECONFIG" >"$run/logs/worker.log" 2>&1 < /dev/null &
printf '%s\n%s\n' "$!" "$worker_bin" > "$pidfile"
echo "demo: worker started (pid $!, metrics on http://127.0.0.1:9464/metrics, log $run/logs/worker.log)"
for _ in $(seq 1 100); do
  curl -fsS http://127.0.0.1:9464/readyz >/dev/null 2>&1 && break
  sleep 0.1
done

echo "demo: rolling out service 'web' (3 x nginx:1.27) into namespace 'demo'"
bin/deployflow rollout --namespace demo --service web --image nginx:1.27 --replicas 3

echo
echo "demo: kubectl get rs,pods -n demo"
kubectl get rs,pods -n demo -o wide
echo
echo "demo: the workflow in the Temporal UI: http://127.0.0.1:8233/namespaces/default/workflows"
echo "demo: stop everything with 'make dev-down'"
