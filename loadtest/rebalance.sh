#!/usr/bin/env bash
#
# loadtest/rebalance.sh [instances] [workers]
#
# Rebalancing: starts the local cluster without a worker (release build, warn logs,
# netsim, a schema of its own), then `workers` (default 3) `paceline worker` processes,
# pairs `instances` (default 600) netsim instances across them, queues sends at a steady
# rate, and starts one more worker. Reports the time until the new worker holds its share
# and every instance is connected again, and what happened to the sends queued meanwhile
# (each sent exactly once). Orchestration: loadtest/rebalance.py (stdlib).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export INSTANCES=${1:-600} WORKERS=${2:-3}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
pl_ensure_deps
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
export PL_DEV_ARGS=--no-worker PACELINE_PACING__RAMP_MS=0
export PACELINE_PACING__GRACE_MIN_MS=0 PACELINE_PACING__GRACE_MAX_MS=0
lt_isolate rb
echo "==> starting the local cluster without a worker (release build)"
lt_start_cluster
echo "==> $WORKERS workers, $INSTANCES instances, then one more worker"
python3 loadtest/rebalance.py
echo "repeat: loadtest/rebalance.sh $INSTANCES $WORKERS"
