#!/usr/bin/env bash
#
# loadtest/webhook-throughput.sh [events]
#
# One run, one report: starts the local cluster (release build; one dispatcher) and a
# local webhook sink (loadtest/src/webhook_sink.rs), then
#   1. throughput: commits [events] (default 20000) events to the outbox in one
#      statement and times until the sink has received every delivery (relay ->
#      JetStream -> fan-out -> signed POST -> outcome written);
#   2. isolation: trickles 3000 events at ~300/s and reports the latency from each
#      event's creation to its arrival at the fast endpoint, first alone, then with a
#      second webhook on the same instance whose endpoint never answers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N=${1:-20000}

# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(pl_cache_dir)/target}
pl_ensure_deps
export PATH=$PL_PG_BIN:$PATH

# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
echo "==> building and starting the sink"
lt_start_sink
echo "==> starting the local cluster (release build; webhooks may target loopback)"
export PACELINE_ALLOW_PRIVATE_TARGETS=true
lt_start_cluster
ADMIN=$PACELINE_ADMIN_TOKEN
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

CREATED=$(curl -sf http://127.0.0.1:8787/v1/instances -H "Authorization: Bearer $ADMIN" -d "{\"name\": \"whbench-$(date +%s)\"}")
INST=$(printf '%s' "$CREATED" | json '["instance"]["id"]')
TOKEN=$(printf '%s' "$CREATED" | json '["token"]')
curl -sf "http://127.0.0.1:8787/v1/instances/$INST/webhooks" -H "Authorization: Bearer $TOKEN" \
    -d "{\"url\": \"$SINK_URL/fast\", \"events\": [\"message.queued\"]}" >/dev/null

stats() { curl -sf "$SINK_URL/stats"; }
count() { stats | json '["count"]'; }
wait_count() {
    local want=$1 deadline=$((SECONDS + 300))
    while (($(count) < want)); do
        if ((SECONDS > deadline)); then echo "timed out at $(count) of $want" >&2; exit 1; fi
        sleep 0.1
    done
}

echo "==> pgbench on this cluster's Postgres (single-row 1 KB inserts, 64 clients, 10 s)"
TPS=$(lt_pgbench_tps 64 10)
echo "    pgbench: $TPS tps"
echo "==> 1. throughput: $N events committed at once, one fast endpoint"
curl -sf -X POST "$SINK_URL/reset" >/dev/null
START=$(date +%s.%N)
lt_insert_events "$INST" "$N"
COMMITTED=$(date +%s.%N)
lt_cpu_sample 3 5 "$LOG.cpu" &
SAMPLER=$!
wait_count "$N"
END=$(date +%s.%N)
wait "$SAMPLER" || true
S=$(stats)
python3 - "$N" "$START" "$COMMITTED" "$END" "$S" <<'PY'
import json, sys
n, start, committed, end, s = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
total = end - committed
print(f"    the insert took {committed - start:.1f} s; {n} deliveries in {total:.1f} s from its commit: {n / total:.0f}/s overall, "
      f"{n / max(s['span_s'], 1e-9):.0f}/s between the first and last arrival")
print(f"    from event creation to arrival: p50 {s['p50_ms'] / 1000:.1f} s, p99 {s['p99_ms'] / 1000:.1f} s")
PY
echo "    CPU by process during the run (200% = both cores):"
cat "$LOG.cpu" 2>/dev/null || true
rm -f "$LOG.cpu"

trickle() {
    for _ in $(seq 1 100); do
        lt_insert_events "$INST" 30
        sleep 0.1
    done
}
echo "==> 2. isolation: 3000 events at ~300/s"
curl -sf -X POST "$SINK_URL/reset" >/dev/null
trickle
wait_count 3000
ALONE=$(stats)
echo "    fast endpoint alone:                 $ALONE"
curl -sf "http://127.0.0.1:8787/v1/instances/$INST/webhooks" -H "Authorization: Bearer $TOKEN" \
    -d "{\"url\": \"$SINK_URL/hang\", \"events\": [\"message.queued\"]}" >/dev/null
curl -sf -X POST "$SINK_URL/reset" >/dev/null
trickle
wait_count 3000
WITH=$(stats)
echo "    fast endpoint next to a hanging one: $WITH"
python3 - "$ALONE" "$WITH" <<'PY'
import json, sys
a, w = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"==> added latency at the fast endpoint while another hangs: p50 {w['p50_ms'] - a['p50_ms']:+.1f} ms, "
      f"p99 {w['p99_ms'] - a['p99_ms']:+.1f} ms (goals: >= 2000 deliveries/s, no added latency)")
PY
