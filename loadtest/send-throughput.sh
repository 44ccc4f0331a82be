#!/usr/bin/env bash
#
# loadtest/send-throughput.sh [seconds]
#
# One run, one report: starts the local cluster (release build, netsim network), creates
# an instance, measures accepted POST {inst}/messages per second and p50/p99 latency with
# goose at 64 concurrent users sending 1 KB texts, then the same with wrk (a C load
# generator from Debian's packages: 64 connections, 2 threads), then measures pgbench
# single-row-insert TPS (64 clients, 1 KB rows) on the same Postgres, and prints each
# and its ratio to pgbench. LOADTEST_WRK=0 skips wrk.
# The instance is not paired, so this measures accepting (validate, store, queue), which
# is what a client waits for; sending is paced per instance by design.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-30}
USERS=${LOADTEST_USERS:-64}

# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(pl_cache_dir)/target}

echo "==> building the benchmark (goose)"
cargo build --release --manifest-path loadtest/Cargo.toml --target-dir "$CARGO_TARGET_DIR/loadtest" >/dev/null
LOADER=$CARGO_TARGET_DIR/loadtest/release/send-throughput

# LOADTEST_PG_STATS=1: load pg_stat_statements and print where Postgres spent its time.
if [[ ${LOADTEST_PG_STATS:-0} == 1 ]]; then
    export PL_PG_EXTRA_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
fi

pl_ensure_deps
export PATH=$PL_PG_BIN:$PATH
if [[ ${LOADTEST_WRK:-1} == 1 ]] && ! command -v wrk >/dev/null 2>&1; then
    echo "==> installing wrk (apt)"
    _pl_apt_install wrk
fi

# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
# LOADTEST_API_URL (with LOADTEST_ADMIN_TOKEN and LOADTEST_DATABASE_URL): measure a
# cluster that runs elsewhere, so the load generator has this machine to itself; the
# ratio is then taken against pgbench on that cluster's Postgres, run from here.
if [[ -n ${LOADTEST_API_URL:-} ]]; then
    API=${LOADTEST_API_URL%/}
    ADMIN=${LOADTEST_ADMIN_TOKEN:?LOADTEST_ADMIN_TOKEN is needed with LOADTEST_API_URL}
    PACELINE_DATABASE_URL=${LOADTEST_DATABASE_URL:?LOADTEST_DATABASE_URL is needed with LOADTEST_API_URL}
    LOG=$(mktemp)
    trap 'rm -f "$LOG"' EXIT
    echo "==> measuring the cluster at $API"
else
    echo "==> starting the local cluster (release build)"
    lt_start_cluster
    API=http://127.0.0.1:8787
    ADMIN=$PACELINE_ADMIN_TOKEN
fi

NAME="bench-$(date +%s)"
CREATED=$(curl -sf "$API/v1/instances" -H "Authorization: Bearer $ADMIN" -d "{\"name\": \"$NAME\"}")
export LOADTEST_TOKEN
export LOADTEST_INSTANCE
LOADTEST_TOKEN=$(printf '%s' "$CREATED" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
LOADTEST_INSTANCE=$(printf '%s' "$CREATED" | python3 -c 'import json,sys; print(json.load(sys.stdin)["instance"]["id"])')

echo "==> goose: $USERS users, ${SECS}s, POST /v1/instances/{id}/messages with 1 KB texts"
# Where the time goes: CPU per process over 10 s in the middle of the run.
lt_cpu_sample $((SECS / 3)) 10 "$LOG.cpu" &
SAMPLER=$!
if [[ ${LOADTEST_PG_STATS:-0} == 1 ]]; then
    psql -q "$PACELINE_DATABASE_URL" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()" >/dev/null
fi
RESULT=$("$LOADER" --host "$API" --users "$USERS" --increase-rate "$USERS" --run-time "${SECS}s" --quiet --no-print-metrics 2>/dev/null | grep '^accepted=')
echo "    $RESULT"
wait "$SAMPLER" || true
echo "    CPU by process on this machine during the run (200% = both cores):"
cat "$LOG.cpu" 2>/dev/null || true
rm -f "$LOG.cpu"
if [[ ${LOADTEST_PG_STATS:-0} == 1 ]]; then
    echo "    Postgres time by statement during the run (pg_stat_statements, top 12):"
    psql -q "$PACELINE_DATABASE_URL" -At -F ' | ' -c "SELECT round(total_exec_time)::text || ' ms', calls, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 110) FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 12" | sed 's/^/      /'
fi
ACCEPTED=$(printf '%s' "$RESULT" | sed -E 's/.*accepted_per_sec=([0-9.]+).*/\1/')

WRK_ACCEPTED=0
if [[ ${LOADTEST_WRK:-1} == 1 ]]; then
    echo "==> wrk: $USERS connections, 2 threads, ${SECS}s, the same requests"
    LUA=$(mktemp --suffix .lua)
    cat >"$LUA" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("LOADTEST_TOKEN")
wrk.body = '{"to": "5511900000000", "type": "text", "text": "' .. string.rep("x", 1024) .. '"}'
LUA
    lt_cpu_sample $((SECS / 3)) 10 "$LOG.cpu" &
    SAMPLER=$!
    OUT=$(wrk -t 2 -c "$USERS" -d "${SECS}s" --latency -s "$LUA" "$API/v1/instances/$LOADTEST_INSTANCE/messages")
    rm -f "$LUA"
    wait "$SAMPLER" || true
    WRK_ACCEPTED=$(python3 - "$OUT" "$SECS" <<'PY'
import re, sys
out = sys.argv[1]
total = int(re.search(r"(\d+) requests in", out).group(1))
m = re.search(r"requests in ([\d.]+)(ms|s|m)", out)
dur = float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
bad = int(bad.group(1)) if bad else 0
lat = dict(re.findall(r"^\s+(50|99)%\s+([\d.]+\w+)", out, re.M))
print(f"{(total - bad) / dur:.1f}")
print(f"    accepted={(total - bad) / dur:.0f}/s (202s only; {bad} other answers) p50={lat.get('50')} p99={lat.get('99')}", file=sys.stderr)
PY
)
    echo "    CPU by process on this machine during the run (200% = both cores):"
    cat "$LOG.cpu" 2>/dev/null || true
    rm -f "$LOG.cpu"
fi

echo "==> pgbench: $USERS clients, ${SECS}s, single-row INSERT of 1 KB on the same Postgres"
TPS=$(lt_pgbench_tps "$USERS" "$SECS")
echo "    tps=$TPS"

python3 - "$ACCEPTED" "$WRK_ACCEPTED" "$TPS" <<'PY'
import sys
accepted, wrk, tps = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print(f"==> goose: accepted {accepted:.0f}/s vs pgbench {tps:.0f} tps: ratio {accepted / tps:.2f} (goals: >= 0.8 and >= 3000/s)")
if wrk:
    print(f"==> wrk:   accepted {wrk:.0f}/s vs pgbench {tps:.0f} tps: ratio {wrk / tps:.2f}")
PY
