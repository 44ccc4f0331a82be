#!/usr/bin/env bash
#
# loadtest/instances-per-worker.sh [instances]
#
# Instances per worker: starts the local cluster without a worker (release build, warn
# logs, netsim; `paceline dev --no-worker`), then one `paceline worker` process, and pairs
# `instances` (default 1000) netsim instances onto it. Reports the worker's RSS per
# instance (over its RSS with none), its idle CPU, the Redis commands per second it makes
# while idle (lease renewal is batched: this should not grow with N), and the time for a
# fresh worker to claim and connect all N after the first one is stopped (and how long the
# first took to stop on SIGTERM). Orchestration:
# loadtest/instances_per_worker.py (Python stdlib).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export INSTANCES=${1:-1000}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
pl_ensure_deps
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
export PL_DEV_ARGS=--no-worker
# A schema and prefixes of its own: instances left by earlier runs in .paceline would be
# claimed by the worker and counted.
lt_isolate ipw
export PACELINE_PACING__RAMP_MS=0
echo "==> starting the local cluster without a worker (release build)"
lt_start_cluster
export WORKER_METRICS=127.0.0.1:9470
echo "==> one worker, $INSTANCES instances"
python3 loadtest/instances_per_worker.py
echo "repeat: loadtest/instances-per-worker.sh $INSTANCES"
