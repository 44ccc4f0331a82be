#!/usr/bin/env bash
#
# loadtest/rolling-upgrade.sh [instances] [workers]
#
# A rolling upgrade of the workers, as the chart's rolling update does it (maxSurge 1,
# maxUnavailable 0), run locally: starts the local cluster without a worker (release
# build, warn logs, netsim, a schema of its own), then `workers` (default 3) `paceline
# worker` processes, and pairs `instances` (default 3000) netsim instances across them.
# A feed (loadtest/src/pipeline_feed.rs) queues a text on every instance every GAP_MS
# (default 10000) for FEED_S (default 360) seconds. After SETTLE_S (30), for each old
# worker in turn: a new worker starts; once its /readyz answers, the old one gets SIGTERM
# and hands its instances over; the next step starts once it has exited. At the end the
# new workers must each hold their share with every instance connected. It reports, from
# each instance's `instance.state` events, every release of a session (by a stopping
# worker, or by rebalancing onto a new one): the time without a lease (release to the
# next claim) and the time until the session is connected again, at p50, p99 and max;
# then that every accepted text was sent exactly once (Postgres and netsim's inbox). The
# post-connection grace is 0 here, so sends go on through every handoff. Orchestration:
# loadtest/rolling_upgrade.py (stdlib Python and psql).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export INSTANCES=${1:-3000} WORKERS=${2:-3}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(pl_cache_dir)/target}
pl_ensure_deps
export PATH=$PL_PG_BIN:$PATH
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
echo "==> building the feed"
lt_build_bins pipeline-feed
export FEED_BIN=$CARGO_TARGET_DIR/loadtest/release/pipeline-feed
export PL_DEV_ARGS=--no-worker PACELINE_PACING__RAMP_MS=0 PACELINE_WORKER__MAX_INSTANCES=20000
export PACELINE_PACING__GRACE_MIN_MS=0 PACELINE_PACING__GRACE_MAX_MS=0
# A text every 10 s to one recipient who never answers is what ban-risk pacing slows.
export PACELINE_RISK__INTERVAL_MS=${PACELINE_RISK__INTERVAL_MS:-86400000}
lt_isolate ru
echo "==> starting the local cluster without a worker (release build)"
lt_start_cluster
echo "==> $WORKERS workers, $INSTANCES instances fed texts; each replaced in turn"
python3 loadtest/rolling_upgrade.py
echo "pgbench single-row INSERT of 1 KB on the same Postgres, same run: $(printf %.0f "$(lt_pgbench_tps 64 10)") tps"
echo "repeat: loadtest/rolling-upgrade.sh $INSTANCES $WORKERS"
