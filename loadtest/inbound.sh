#!/usr/bin/env bash
#
# loadtest/inbound.sh [instances] [rate] [seconds] [history]
#
# Inbound (#38 item 6): starts a local webhook sink and the local cluster (release build,
# warn logs, netsim, webhooks allowed to loopback) with one `paceline worker` and one
# `paceline dispatcher` as processes of their own, pairs `instances` (default 100)
# netsim instances, each with a webhook to the sink for `message.received`, and has 20
# contacts write to them at `rate` messages a second (default 2000) for `seconds`
# (default 120), sent through netsim's `POST /control/messages` in batches every 100 ms
# (open loop). It reports per 10 s and in all: messages netsim took, messages logged
# (the worker's paceline_worker_received_total), webhook deliveries at the sink, netsim's
# unacknowledged backlog, CPU per process; then the drain, every message logged once
# and delivered, network-to-log and event-to-arrival latency. Then a history sync of
# `history` messages (default 100000) to a new instance on the same worker: the time it
# takes and the worker's RSS, sampled every 200 ms. Then pgbench's single-row insert
# TPS on the same Postgres. Orchestration: loadtest/inbound.py (Python stdlib). The
# same under faults is loadtest/chaos.sh (contacts write in there too).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export INSTANCES=${1:-100} RATE=${2:-2000} SECONDS_=${3:-120} HISTORY=${4:-100000}

# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(pl_cache_dir)/target}
pl_ensure_deps
export PATH=$PL_PG_BIN:$PATH
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
echo "==> building and starting the sink"
lt_start_sink
export SINK_URL
export PACELINE_ALLOW_PRIVATE_TARGETS=true PACELINE_WORKER__MAX_INSTANCES=20000
export PACELINE_RISK__INTERVAL_MS=${PACELINE_RISK__INTERVAL_MS:-86400000}
lt_isolate ib
export PL_DEV_ARGS="--no-worker --no-dispatcher"
echo "==> starting the local cluster (release build)"
lt_start_cluster
echo "==> $INSTANCES instances, contacts writing in at $RATE/s for $SECONDS_ s; then a history of $HISTORY"
python3 loadtest/inbound.py
echo "pgbench single-row INSERT of 1 KB on the same Postgres, same run: $(printf %.0f "$(lt_pgbench_tps 64 10)") tps"
echo "repeat: loadtest/inbound.sh $INSTANCES $RATE $SECONDS_ $HISTORY"
