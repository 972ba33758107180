#!/usr/bin/env bash
# upgrade-check.sh FROM: a provider's upgrade, rehearsed on the local stack
# (docs/upgrading.md, "When a gate may go, and how", step 5): 20 leases
# mid-deploy on the worker built from FROM (a commit or tag: the release
# the provider runs), then this tree's worker (-tags upgradetest) takes
# over and the old one stops. Every deploy finishes, nothing is written
# twice, and a lease deployed after the switch runs the new build.
set -euo pipefail
cd "$(dirname "$0")/.."
from="${1:?usage: hack/upgrade-check.sh FROM (a commit or tag)}"
work="$(mktemp -d)"
trap 'git worktree remove --force "$work/src" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --detach "$work/src" "$from" >/dev/null
(cd "$work/src" && go build -o "$work/deployflow-worker" ./worker)
echo "upgrade-check: build A is $(git rev-parse --short "$from"), build B this tree"
hack/with-stack.sh env DEPLOYFLOW_UPGRADE_FROM="$work/deployflow-worker" \
  go test -count=1 -v -run '^TestLiveUpgradeInTheMiddleOfTwentyDeploys$' ./worker/
