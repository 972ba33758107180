#!/usr/bin/env bash
# install-crds.sh [CONTEXT...]: installs deployflow's CRDs with kubectl in
# each kubeconfig context given (the current one if none), waits until the
# API server serves them, and refreshes kubectl's discovery cache, so that
# the very next `kubectl get deployflow` knows the category.
#
# Why the refresh: kubectl caches the API's discovery on disk (KUBECACHEDIR,
# default ~/.kube/cache) for hours. `kubectl apply` writes that cache before
# the CRDs exist, and `kubectl get CATEGORY` expands a category from the
# cache alone: unlike a resource name, a category it does not find does not
# make it read the server again (kubernetes/kubernetes#65517). On a machine
# whose cache did not already know deployflow's CRDs, `kubectl get
# deployflow` then failed with `the server doesn't have a resource type
# "deployflow"` until the cache expired. `kubectl api-resources` reads the
# server again and rewrites the cache.
set -euo pipefail
crds=$(cd "$(dirname "$0")/.." && pwd)/deploy/helm/deployflow/crds
[ $# -gt 0 ] || set -- "$(kubectl config current-context)"
for ctx in "$@"; do
  kubectl --context "$ctx" apply --server-side -f "$crds"
  kubectl --context "$ctx" wait --for=condition=Established --timeout=60s \
    crd/leases.deployflow.dev crd/hostnamereservations.deployflow.dev crd/ipreservations.deployflow.dev
  got=$(kubectl --context "$ctx" api-resources --categories deployflow -o name | sort | tr '\n' ' ')
  want="hostnamereservations.deployflow.dev ipreservations.deployflow.dev leases.deployflow.dev "
  if [ "$got" != "$want" ]; then
    echo "install-crds: context $ctx: kubectl's category deployflow lists [${got% }], want [${want% }]" >&2
    exit 1
  fi
done
