#!/usr/bin/env bash
#
# loadtest/pipeline.sh [instances] [minutes]
#
# The pipeline end to end (#38 item 3): starts a local webhook sink and the local cluster
# (release build, warn logs, netsim, webhooks allowed to loopback) with one `paceline
# worker` and one `paceline dispatcher` as processes of their own, pairs
# `instances` (default 2000) netsim instances at the floor (min_interval_ms 1000,
# max_per_minute 60, jitter 0, ramp-up off, a 15 s grace, ban-risk evaluation off), gives each a webhook to the
# sink for `message.queued` and `message.sent` (an endpoint URL of its own each, or
# ENDPOINTS URLs shared round robin), and feeds each one text a second for
# `minutes` (default 10) with loadtest/src/pipeline_feed.rs (tokio + reqwest, open loop,
# 5 texts queued on each first so no queue runs dry). Then it drains and checks accepted
# = sent = delivered, and prints per minute: sends/s, deliveries/s, event-to-arrival
# p50/p99, the backlog, and CPU per process; then pgbench's single-row insert TPS on the
# same Postgres. Orchestration and report: loadtest/pipeline.py (Python stdlib).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export INSTANCES=${1:-2000}
export MINUTES=${2:-10}

# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(pl_cache_dir)/target}
pl_ensure_deps
export PATH=$PL_PG_BIN:$PATH
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
echo "==> building the feed, building and starting the sink"
lt_build_bins pipeline-feed
export FEED_BIN=$CARGO_TARGET_DIR/loadtest/release/pipeline-feed
lt_start_sink
export SINK_URL
export PACELINE_ALLOW_PRIVATE_TARGETS=true
export PACELINE_PACING__JITTER=0 PACELINE_PACING__RAMP_MS=0 PACELINE_WORKER__MAX_INSTANCES=20000
# Capacity: ban-risk evaluation off by default (60 texts a minute to one recipient who
# never answers is the spam it exists to slow); PACELINE_RISK__INTERVAL_MS=60000 turns it on.
export PACELINE_RISK__INTERVAL_MS=${PACELINE_RISK__INTERVAL_MS:-86400000}
export PACELINE_PACING__GRACE_MIN_MS=${PACELINE_PACING__GRACE_MIN_MS:-15000} PACELINE_PACING__GRACE_MAX_MS=${PACELINE_PACING__GRACE_MAX_MS:-15000}
lt_isolate pl
# NATS's monitor, for the fan-out consumer's pending counts (only when this starts NATS).
export PL_NATS_MONITOR_PORT=${PL_NATS_MONITOR_PORT:-28222}
# The worker and the dispatcher run as processes of their own (pipeline.py starts them),
# so CPU and memory are told per role; `paceline dev` keeps the API, console and netsim.
export PL_DEV_ARGS="--no-worker --no-dispatcher"
echo "==> starting the local cluster (release build)"
lt_start_cluster
echo "==> pairing $INSTANCES instances, then feeding them for $MINUTES min"
python3 loadtest/pipeline.py
echo "pgbench single-row INSERT of 1 KB on the same Postgres, same run: $(printf %.0f "$(lt_pgbench_tps 64 10)") tps"
echo "repeat: loadtest/pipeline.sh $INSTANCES $MINUTES"
