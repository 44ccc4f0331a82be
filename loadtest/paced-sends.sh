#!/usr/bin/env bash
#
# loadtest/paced-sends.sh [instances] [sends_each]
#
# Paced sends per worker: starts the local cluster (release build, warn logs, one worker,
# netsim), pairs `instances` (default 1000) netsim instances, queues `sends_each`
# (default 15) texts on each, and lets the worker send them, each instance at its own
# floor (min_interval_ms 1000, max_per_minute 60; jitter 0 so the chosen gap is known;
# ramp-up off; the post-connection grace fixed at 15 s; and every instance's send window
# set to open at the same minute, after every send is queued, so all instances start at
# once and "sustained" is measured while all of them send). Reports, from what netsim received:
# sustained sends/s, the pacing error (real gap minus chosen gap) at p50/p99/max, and the
# worker's lease losses, and what each send cost Postgres (commits, rows), Redis and NATS
# while all send, beside pgbench's single-row insert TPS on the same Postgres. Load generator and orchestration: loadtest/paced_sends.py
# (Python stdlib). MIN_INTERVAL_MS / MAX_PER_MINUTE change the pace (below the floors
# with unsafe_pacing, set by the admin). REPLY_EVERY_S makes it a conversation: the
# recipient writes back to every instance that often while they send. The sends are
# queued by loadtest/src/pipeline_feed.rs (built here).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export INSTANCES=${1:-1000}
export SENDS=${2:-15}

# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
pl_ensure_deps
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
# NATS's monitor, for its message counts (only when this starts NATS).
export PL_NATS_MONITOR_PORT=${PL_NATS_MONITOR_PORT:-28222}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(pl_cache_dir)/target}
echo "==> building the feed"
lt_build_bins pipeline-feed
export FEED_BIN=$CARGO_TARGET_DIR/loadtest/release/pipeline-feed
export PACELINE_PACING__JITTER=0 PACELINE_PACING__RAMP_MS=0 PACELINE_WORKER__MAX_INSTANCES=20000
# A schema and prefixes of its own: messages and instances left by earlier runs in
# .paceline would be swept and counted.
lt_isolate ps
export PACELINE_PACING__GRACE_MIN_MS=${PACELINE_PACING__GRACE_MIN_MS:-15000} PACELINE_PACING__GRACE_MAX_MS=${PACELINE_PACING__GRACE_MAX_MS:-15000}
echo "==> starting the local cluster (release build)"
lt_start_cluster
echo "==> pairing $INSTANCES instances, then $SENDS sends each"
python3 loadtest/paced_sends.py
echo "pgbench single-row INSERT of 1 KB on the same Postgres, same run: $(printf %.0f "$(lt_pgbench_tps 64 10)") tps"
echo "repeat: ${REPLY_EVERY_S:+REPLY_EVERY_S=$REPLY_EVERY_S }${PACELINE_RISK__INTERVAL_MS:+PACELINE_RISK__INTERVAL_MS=$PACELINE_RISK__INTERVAL_MS }loadtest/paced-sends.sh $INSTANCES $SENDS"
