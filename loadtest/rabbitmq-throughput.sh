#!/usr/bin/env bash
#
# loadtest/rabbitmq-throughput.sh [events]
#
# One run, one report: starts the local cluster (release build; one dispatcher, inside
# `paceline dev`) and a RabbitMQ node of the run's own (Debian's rabbitmq-server, as the
# test command runs it), gives an instance a RabbitMQ sink, commits [events] (default
# 20000) events to its outbox in one statement, and times until the sink's queue holds
# them all (relay -> JetStream -> the sink's ordered consumer -> AMQP publish with
# confirms -> cursor written). Then the same for a webhook to a local sink, and for an
# account's sink (which reads every instance's events and keeps its account's), in the
# same run, so the figures sit side by side with this run's pgbench figure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N=${1:-20000}
AMQP_PORT=${LT_AMQP_PORT:-25683}

# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(pl_cache_dir)/target}
pl_ensure_deps
pl_ensure_test_python
export PATH=$PL_PG_BIN:$PATH

# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
echo "==> building and starting the webhook sink"
lt_start_sink
RMQ_DIR=$(mktemp -d)
echo "==> a RabbitMQ node of this run's own on :$AMQP_PORT"
LT_EXTRA_CLEANUP='_pl_stop_rabbitmq; rm -rf "$RMQ_DIR"'
PL_TEST_RABBITMQ_DIST_PORT=$((AMQP_PORT + 1)) PL_TEST_EPMD_PORT=$((AMQP_PORT + 2)) pl_start_rabbitmq "$RMQ_DIR" "$AMQP_PORT"
AMQP_URL=amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f
echo "==> starting the local cluster (release build; sinks and webhooks may target loopback)"
export PACELINE_ALLOW_PRIVATE_TARGETS=true
lt_start_cluster
ADMIN=$PACELINE_ADMIN_TOKEN
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

new_instance() {
    curl -sf http://127.0.0.1:8787/v1/instances -H "Authorization: Bearer $ADMIN" -d "{\"name\": \"$1-$(date +%s%N)\"}"
}
# How many messages queue $1 holds (pika, passive declare).
queue_len() {
    "$PL_TEST_PYTHON" - "$AMQP_URL" "$1" <<'PY'
import sys, pika
conn = pika.BlockingConnection(pika.URLParameters(sys.argv[1]))
try:
    print(conn.channel().queue_declare(queue=sys.argv[2], passive=True).method.message_count)
except Exception:
    print(0)
finally:
    try:
        conn.close()
    except Exception:
        pass
PY
}
sink_count() { curl -sf "$SINK_URL/stats" | json '["count"]'; }
# Prints how fast $N things ($1) went from the insert's commit, from START, COMMITTED, END.
rate() {
    python3 -c "import sys; w,n,s,c,e=sys.argv[1],int(sys.argv[2]),*map(float,sys.argv[3:]); print(f'    the insert took {c-s:.1f} s; {n} {w} in {e-c:.1f} s from its commit: {n/(e-c):.0f}/s')" \
        "$1" "$N" "$START" "$COMMITTED" "$END"
}
# Waits until $1 (a command printing a count) reaches $2; prints the seconds it took.
wait_for_count() {
    local deadline=$((SECONDS + 600)) have
    while have=$($1) && ((have < $2)); do
        if ((SECONDS > deadline)); then echo "timed out at $have of $2" >&2; exit 1; fi
        sleep 0.2
    done
}

echo "==> pgbench on this cluster's Postgres (single-row 1 KB inserts, 64 clients, 10 s)"
TPS=$(lt_pgbench_tps 64 10)
echo "    pgbench: $TPS tps"

CREATED=$(new_instance rmqbench)
INST=$(printf '%s' "$CREATED" | json '["instance"]["id"]')
curl -sf -X PUT "http://127.0.0.1:8787/v1/instances/$INST/rabbitmq" -H "Authorization: Bearer $ADMIN" \
    -d "{\"url\": \"$AMQP_URL\", \"allow_private_targets\": true, \"events\": [\"message.queued\"]}" >/dev/null
QUEUE=paceline.$INST
# The sink declares its queue once a dispatcher has claimed it.
declared() {
    for _ in $(seq 1 100); do
        [[ $("$PL_RABBITMQ_CTL" -e "$PL_RABBITMQ_ENV" ctl list_queues name 2>/dev/null | grep -c "^$1") -ge 1 ]] && return
        sleep 0.2
    done
}
declared "$QUEUE"
echo "==> 1. RabbitMQ: $N events committed at once, one sink"
START=$(date +%s.%N)
lt_insert_events "$INST" "$N"
COMMITTED=$(date +%s.%N)
lt_cpu_sample 0.5 2 "$LOG.cpu" &
SAMPLER=$!
wait_for_count "queue_len $QUEUE" "$N"
END=$(date +%s.%N)
wait "$SAMPLER" || true
rate "messages confirmed and queued"
echo "    CPU by process during the run (200% = both cores):"
cat "$LOG.cpu" 2>/dev/null || true

CREATED=$(new_instance whbench)
WINST=$(printf '%s' "$CREATED" | json '["instance"]["id"]')
WTOKEN=$(printf '%s' "$CREATED" | json '["token"]')
curl -sf "http://127.0.0.1:8787/v1/instances/$WINST/webhooks" -H "Authorization: Bearer $WTOKEN" \
    -d "{\"url\": \"$SINK_URL/fast\", \"events\": [\"message.queued\"]}" >/dev/null
curl -sf -X POST "$SINK_URL/reset" >/dev/null
echo "==> 2. webhooks, same run: $N events committed at once, one fast endpoint"
START=$(date +%s.%N)
lt_insert_events "$WINST" "$N"
COMMITTED=$(date +%s.%N)
wait_for_count sink_count "$N"
END=$(date +%s.%N)
rate "deliveries"
rm -f "$LOG.cpu"

ACCOUNT=$(curl -sf http://127.0.0.1:8787/v1/accounts -H "Authorization: Bearer $ADMIN" -d "{\"name\": \"rmqbench-$(date +%s%N)\"}")
ACCT=$(printf '%s' "$ACCOUNT" | json '["account"]["id"]')
ATOKEN=$(printf '%s' "$ACCOUNT" | json '["token"]')
AINST=$(curl -sf http://127.0.0.1:8787/v1/instances -H "Authorization: Bearer $ATOKEN" \
    -d "{\"name\": \"acctbench-$(date +%s%N)\"}" | json '["instance"]["id"]')
curl -sf -X PUT "http://127.0.0.1:8787/v1/accounts/$ACCT/rabbitmq" -H "Authorization: Bearer $ADMIN" \
    -d "{\"url\": \"$AMQP_URL\", \"allow_private_targets\": true, \"events\": [\"message.queued\"]}" >/dev/null
declared "paceline.$ACCT"
echo "==> 3. RabbitMQ, an account's sink, same run: $N events of one of its instances committed at once"
START=$(date +%s.%N)
lt_insert_events "$AINST" "$N"
COMMITTED=$(date +%s.%N)
wait_for_count "queue_len paceline.$ACCT" "$N"
END=$(date +%s.%N)
rate "messages confirmed and queued"
