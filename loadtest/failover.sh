#!/usr/bin/env bash
#
# loadtest/failover.sh [instances] [workers]
#
# Failover: starts the local cluster without a worker (release build, warn logs, netsim, a
# schema of its own), then `workers` (default 3) `paceline worker` processes, pairs
# `instances` (default 600) netsim instances across them and queues paced sends on each
# (one every 4 s, the seed's post-connection grace of 15-30 s kept). Then it kills one
# worker with SIGKILL and, once its instances send again, stops another with SIGTERM.
# For each it reports, over the instances the stopped worker held: the time until each
# session is open again on another worker (lease taken, state connected) and the time
# until it sends again, at p50, p99 and max; and every send received exactly once.
# PACELINE_WORKER__LEASE_TTL_MS changes the lease TTL (default 6000). Orchestration:
# loadtest/failover.py (stdlib Python and psql).
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
lt_isolate fo
echo "==> starting the local cluster without a worker (release build)"
lt_start_cluster
echo "==> $WORKERS workers, $INSTANCES instances with queued sends; kill -9 one, then SIGTERM one"
python3 loadtest/failover.py
echo "repeat: loadtest/failover.sh $INSTANCES $WORKERS (lease TTL ${PACELINE_WORKER__LEASE_TTL_MS:-6000} ms)"
