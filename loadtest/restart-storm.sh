#!/usr/bin/env bash
#
# loadtest/restart-storm.sh [instances] [workers]
#
# Restart storm: starts the local cluster without a worker (release build, warn logs,
# netsim; `paceline dev --no-worker`), then `workers` (default 2) `paceline worker`
# processes, and pairs `instances` (default 10000) netsim instances on them. It measures
# what they cost idle (Postgres commits and rows, Redis commands and NATS messages per
# second, per 1,000 instances, over two minutes: two ban-risk rounds). Then kills
# every worker at once (SIGKILL: no handoff, as in an outage), queues a text on 1,000
# instances meanwhile, and starts as many fresh workers. Reports the time until every
# session is back, per instance p50/p99, the peak connects per second (paced at
# worker.connects_per_second per worker, with jitter), failed connects, the peak Postgres
# commits/s, Redis commands/s and CPU per process during the storm, and when the queued
# texts went (after their post-connection grace; none lost or sent twice), beside pgbench's
# single-row insert TPS on the same Postgres. Orchestration:
# loadtest/restart_storm.py (Python stdlib). PACELINE_WORKER__CONNECTS_PER_SECOND changes
# the pace.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export INSTANCES=${1:-10000}
export WORKERS=${2:-2}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
pl_ensure_deps
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
export PL_DEV_ARGS=--no-worker
# A schema and prefixes of its own: instances left by earlier runs would be claimed.
lt_isolate rs
export PACELINE_PACING__RAMP_MS=0
# NATS's monitor, for its message counts (only when this starts NATS).
export PL_NATS_MONITOR_PORT=${PL_NATS_MONITOR_PORT:-28222}
echo "==> starting the local cluster without a worker (release build)"
lt_start_cluster
echo "==> $WORKERS workers, $INSTANCES instances, then every worker killed and started again"
python3 loadtest/restart_storm.py
echo "pgbench single-row INSERT of 1 KB on the same Postgres, same run: $(printf %.0f "$(lt_pgbench_tps 64 10)") tps"
echo "repeat: loadtest/restart-storm.sh $INSTANCES $WORKERS"
