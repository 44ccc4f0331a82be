# shellcheck shell=bash
# Shared by the loadtest scripts: start the local cluster (release build, netsim) in the
# background (`LT_PROFILE`, default release) and wait until the API is ready; stop it on exit. Callers may set
# LT_EXTRA_CLEANUP to a command run on exit too; the webhook sink (lt_start_sink) stops then as well. Sets LOG (the cluster's output), DEV
# (its pid) and, once ready, the variables of .paceline/env.

lt_start_cluster() {
    LOG=$(mktemp)
    PL_DEV_PROFILE=${LT_PROFILE:-release} PACELINE_LOG__LEVEL=warn setsid scripts/dev --network sim >"$LOG" 2>&1 &
    DEV=$!
    trap lt_cleanup EXIT
    # A release build on 2 cores takes a while: wait as long as the cluster lives.
    for _ in $(seq 1 3600); do
        if curl -sf http://127.0.0.1:8787/readyz >/dev/null 2>&1; then break; fi
        if ! kill -0 "$DEV" 2>/dev/null; then tail -30 "$LOG"; echo "the cluster did not start" >&2; exit 1; fi
        sleep 1
    done
    # shellcheck source=/dev/null
    source .paceline/env
}

# lt_isolate PREFIX: a database schema and key and subject prefixes of the run's own
# (PREFIX_<epoch>, in RUN_TAG), so instances and messages earlier runs left in .paceline
# are neither claimed nor counted.
lt_isolate() {
    RUN_TAG=${1}_$(date +%s)
    export PACELINE_NAMESPACE__DATABASE_SCHEMA=$RUN_TAG PACELINE_NAMESPACE__KEY_PREFIX=$RUN_TAG PACELINE_NAMESPACE__SUBJECT_PREFIX=$RUN_TAG
}

lt_cleanup() {
    # The run's events stream (its own subject prefix) goes with it: streams left behind
    # keep their reserved bytes until JetStream refuses new ones.
    if [[ -n ${PACELINE_NAMESPACE__SUBJECT_PREFIX:-} && -n ${PACELINE_NATS_URL:-} ]]; then
        python3 loadtest/ltlib.py delete-stream "$PACELINE_NATS_URL" \
            "$(tr '[:lower:]-' '[:upper:]_' <<<"$PACELINE_NAMESPACE__SUBJECT_PREFIX")_EVENTS" || true
    fi
    if [[ -n ${DEV:-} ]]; then
        kill -TERM "$DEV" 2>/dev/null || true
        wait "$DEV" 2>/dev/null || true
    fi
    if [[ -n ${SINK:-} ]]; then kill "$SINK" 2>/dev/null || true; fi
    if [[ -n ${LT_EXTRA_CLEANUP:-} ]]; then eval "$LT_EXTRA_CLEANUP"; fi
    rm -f "${LOG:-}"
}

# lt_build_bins BIN...: the loadtest crate's binaries (release) into
# $CARGO_TARGET_DIR/loadtest/release.
lt_build_bins() {
    local args=() b
    for b in "$@"; do args+=(--bin "$b"); done
    cargo build --release --manifest-path loadtest/Cargo.toml --target-dir "$CARGO_TARGET_DIR/loadtest" "${args[@]}" >/dev/null
}

# lt_start_sink: builds and starts the webhook sink (src/webhook_sink.rs), stopped on
# exit; sets SINK (its pid) and SINK_URL.
lt_start_sink() {
    local out port=''
    lt_build_bins webhook-sink
    out=$(mktemp)
    "$CARGO_TARGET_DIR/loadtest/release/webhook-sink" >"$out" &
    SINK=$!
    trap lt_cleanup EXIT
    for _ in $(seq 1 100); do
        port=$(sed -nE 's/^port=([0-9]+)$/\1/p' "$out")
        [[ -n $port ]] && break
        sleep 0.1
    done
    rm -f "$out"
    [[ -n $port ]] || { echo "the webhook sink did not start" >&2; exit 1; }
    SINK_URL=http://127.0.0.1:$port
}

# CPU per process over $2 seconds after waiting $1, into file $3 (200% = both cores).
lt_cpu_sample() {
    sleep "$1"
    top -b -d "$2" -n 2 -w 200 | awk '/^top -/{n++} n==2 && $1 ~ /^[0-9]+$/ {cpu[$12]+=$9} END {for (c in cpu) if (cpu[c] > 1) printf "    cpu %-16s %5.0f%%\n", c, cpu[c]}' | sort -k3 -rn >"$3"
}

# lt_pgbench_tps CLIENTS SECONDS: pgbench's single-row INSERT of 1 KB on the cluster's
# Postgres (the figure every benchmark reports beside its own); prints the TPS.
lt_pgbench_tps() {
    local clients=$1 secs=$2 script tps
    psql -q "$PACELINE_DATABASE_URL" -c "CREATE TABLE IF NOT EXISTS bench_insert (id bigserial PRIMARY KEY, payload text NOT NULL)" >/dev/null
    script=$(mktemp)
    echo "INSERT INTO bench_insert (payload) VALUES (repeat('x', 1024));" >"$script"
    tps=$("$PL_PG_BIN/pgbench" -n -c "$clients" -j 2 -T "$secs" -f "$script" "$PACELINE_DATABASE_URL" 2>/dev/null | sed -nE 's/^tps = ([0-9.]+).*/\1/p' | head -n 1)
    rm -f "$script"
    psql -q "$PACELINE_DATABASE_URL" -c "DROP TABLE bench_insert" >/dev/null
    echo "$tps"
}

# lt_insert_events INSTANCE N: commits N `message.queued` events of ~300 bytes for the
# instance to its outbox in one statement (the relay publishes them as it would any).
lt_insert_events() {
    psql -q -X "$PACELINE_DATABASE_URL" -v inst="$1" -v n="$2" <<'SQL'
INSERT INTO outbox (id, instance_id, type, payload)
SELECT id, :'inst', 'message.queued', jsonb_build_object(
    'id', id, 'type', 'message.queued', 'instance_id', :'inst',
    'created_at', to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
    'data', jsonb_build_object('n', n, 'text', repeat('x', 200)))
FROM (SELECT n, 'evt_' || replace(gen_random_uuid()::text, '-', '') AS id FROM generate_series(1, :n) n) s;
SQL
}
