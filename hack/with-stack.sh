#!/usr/bin/env bash
# with-stack.sh CMD...: runs CMD with the local stack up. If the stack was not
# running, it is started first and stopped (by PID) afterwards; a stack that
# was already running is reused and left running.
# DEPLOYFLOW_STACK_KEEP_DATA=1: a stack this script started goes down keeping
# its data (bin/devstack down --keep-data), for the next run to go on with it
# (make bench-scale's fleet created over several sessions).
set -uo pipefail
cd "$(dirname "$0")/.."
started=0
if ! bin/devstack running; then
  bin/devstack up >/dev/null || { echo "with-stack: the local stack did not start" >&2; exit 1; }
  started=1
fi
eval "$(bin/devstack env)"
# A stack this script started, it stops, and stopping removes its state:
# CMD may leave what it made (make bench-scale leaves its leases).
if [ "$started" = 1 ] && [ "${DEPLOYFLOW_STACK_KEEP_DATA:-}" != 1 ]; then export DEPLOYFLOW_STACK_DISPOSABLE=1; fi
export CI="${CI:-}"
"$@"
rc=$?
if [ "$started" = 1 ]; then
  if [ "$rc" != 0 ] && [ "${CI:-}" = true ]; then
    # Leave a trail on CI: the end of each component's log.
    for f in "${DEPLOYFLOW_RUN_DIR:-$DEPLOYFLOW_CACHE/run}"/logs/*.log; do
      echo "----- tail $f"; tail -n 30 "$f"
    done
  fi
  if [ "${DEPLOYFLOW_STACK_KEEP_DATA:-}" = 1 ]; then
    bin/devstack down --keep-data || rc=1
  else
    bin/devstack down || rc=1
  fi
fi
exit "$rc"
