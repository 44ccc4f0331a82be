#!/usr/bin/env bash
#
# loadtest/console-pages.sh [seconds]
#
# The console at fleet scale, one run, one report: starts the local cluster (release
# build, warn-level logs, netsim network), seeds its Postgres with 10,000 instances and one
# chat of 100,000 messages (plain INSERTs: what a provider's database holds, without
# pairing 10,000 phones), signs in to the console as the admin, and measures with wrk
# (Debian's package; 4 connections, 2 threads, --latency) each page's p50 and p99:
#   - the fleet's first page (with the counts by state the cluster route computes),
#   - a later page of the fleet (after 5,000 instances),
#   - the 100,000-message chat's first page.
# Then pgbench's single-row-insert TPS on the same Postgres, the figure every benchmark
# reports beside its own (machines of the same size differ by 2x). Goal: p99 < 300 ms.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-20}
INSTANCES=${LOADTEST_INSTANCES:-10000}
MESSAGES=${LOADTEST_MESSAGES:-100000}

# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(pl_cache_dir)/target}
pl_ensure_deps
export PATH=$PL_PG_BIN:$PATH
if ! command -v wrk >/dev/null 2>&1; then
    echo "==> installing wrk (apt)"
    _pl_apt_install wrk
fi
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
echo "==> starting the local cluster (release build)"
lt_start_cluster
API=http://127.0.0.1:8787
CONSOLE=http://127.0.0.1:8789

echo "==> seeding $INSTANCES instances and a chat of $MESSAGES messages"
SEED_START=$(date +%s.%N)
psql -q -v ON_ERROR_STOP=1 "$PACELINE_DATABASE_URL" <<SQL
-- An earlier run's seed (the cluster's data directory is kept between runs).
DELETE FROM log_messages WHERE instance_id IN (SELECT id FROM instances WHERE token_hash LIKE 'seeded-%');
DELETE FROM chats WHERE instance_id IN (SELECT id FROM instances WHERE token_hash LIKE 'seeded-%');
DELETE FROM instances WHERE token_hash LIKE 'seeded-%';
INSERT INTO instances (id, name, token_hash, min_interval_ms, max_per_minute, tags)
SELECT 'inst_' || lpad(to_hex(g), 32, '0'), 'fleet-' || lpad(g::text, 5, '0'),
       'seeded-' || g, 2000, 20, ARRAY['fleet', 'group-' || (g % 10)]
FROM generate_series(1, $INSTANCES) g;
INSERT INTO chats (instance_id, jid, name, last_message_at)
VALUES ('inst_' || lpad(to_hex(1), 32, '0'), '5511900000001@s.whatsapp.net', 'A long chat', now());
INSERT INTO log_messages (instance_id, id, chat_jid, wa_message_id, ts, from_jid, from_me, type, content, status, source)
SELECT 'inst_' || lpad(to_hex(1), 32, '0'), 'msg_' || lpad(to_hex(g), 32, '0'), '5511900000001@s.whatsapp.net',
       'WA' || g, now() - make_interval(secs => g), 
       CASE WHEN g % 2 = 0 THEN '5511900000001@s.whatsapp.net' ELSE '5511900000000@s.whatsapp.net' END,
       g % 2 = 1, 'text', jsonb_build_object('text', 'message number ' || g || ' ' || repeat('x', 80)),
       CASE WHEN g % 2 = 1 THEN 'read' END, 'live'
FROM generate_series(1, $MESSAGES) g;
ANALYZE instances; ANALYZE chats; ANALYZE log_messages;
SQL
python3 -c "import sys,time; print(f'    seeded in {time.time() - float(sys.argv[1]):.1f} s')" "$SEED_START"
FIRST=inst_$(printf '%032x' 1)
MIDDLE=inst_$(printf '%032x' $((INSTANCES / 2)))
LATER=$(python3 -c 'import base64,sys; print(base64.urlsafe_b64encode(("i1|" + sys.argv[1]).encode()).decode().rstrip("="))' "$MIDDLE")

echo "==> signing in to the console as the admin"
JAR=$(mktemp)
LT_EXTRA_CLEANUP="rm -f $JAR"
curl -sf -c "$JAR" -b "$JAR" "$CONSOLE/" >"$JAR.html"
CSRF=$(grep -o 'name="csrf" value="[^"]*"' "$JAR.html" | head -1 | sed 's/.*value="//;s/"$//')
rm -f "$JAR.html"
curl -sf -c "$JAR" -b "$JAR" -o /dev/null "$CONSOLE/" --data-urlencode "csrf=$CSRF" --data-urlencode "token=$PACELINE_ADMIN_TOKEN"
COOKIE=$(awk '$6 ~ /pl_console$/ {print $6 "=" $7}' "$JAR")
[[ -n $COOKIE ]] || { echo "no session cookie" >&2; exit 1; }
# Each page once, checked: the seeded data is there.
check() { curl -sf -H "Cookie: $COOKIE" "$CONSOLE$1" | grep -q "$2" || { echo "$1 does not show $2" >&2; exit 1; }; }
# Every instance of the cluster (the seed and any an earlier benchmark left).
TOTAL=$(psql -tA "$PACELINE_DATABASE_URL" -c "SELECT count(*) FROM instances")
check "/fleet" "$TOTAL</strong> in all"
check "/fleet?cursor=$LATER" "fleet-$(printf '%05d' $((INSTANCES / 2 + 1)))"
check "/i/$FIRST/chats/5511900000001%40s.whatsapp.net" "message number 1 "

RESULTS=()
measure() {
    local label=$1 path=$2 out
    out=$(wrk -t 2 -c 4 -d "${SECS}s" --latency -H "Cookie: $COOKIE" "$CONSOLE$path")
    RESULTS+=("$(python3 - "$label" "$out" <<'PY'
import re, sys
label, out = sys.argv[1], sys.argv[2]
total = int(re.search(r"(\d+) requests in", out).group(1))
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
lat = dict(re.findall(r"^\s+(50|99)%\s+([\d.]+\w+)", out, re.M))
rps = re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)
print(f"{label:<34} p50={lat.get('50'):>9} p99={lat.get('99'):>9} {float(rps):7.1f} pages/s  ({total} pages, {bad.group(1) if bad else 0} not 2xx)")
PY
)")
    echo "    ${RESULTS[-1]}"
}
echo "==> wrk: 4 connections, 2 threads, ${SECS}s a page"
measure "fleet, first page" "/fleet"
measure "fleet, after $((INSTANCES / 2)) instances" "/fleet?cursor=$LATER"
measure "chat of $MESSAGES messages" "/i/$FIRST/chats/5511900000001%40s.whatsapp.net"

echo "==> pgbench: 64 clients, 10s, single-row INSERT of 1 KB on the same Postgres"
TPS=$(lt_pgbench_tps 64 10)
echo "==> results (goal: p99 < 300 ms; pgbench $TPS tps on this machine)"
printf '    %s\n' "${RESULTS[@]}"
