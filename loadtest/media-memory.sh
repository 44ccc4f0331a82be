#!/usr/bin/env bash
#
# loadtest/media-memory.sh [size_mb]
#
# The API pod's memory under large media: starts the local cluster (release build, warn
# logs), adds one more API pod (the one measured) on :8788, then through it
#   1. 20 concurrent POST {inst}/messages whose media.url is a size_mb file (default 100)
#      served on loopback (20 instances, one send each; 20 large-body slots, so all 20
#      download at once: the worst case for memory);
#   2. 50 concurrent GETs of one of those media by signed URL.
# Load generator: curl (one process per request). Prints each phase's time and the
# measured pod's peak RSS (VmHWM). Goal: under 512 MB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SIZE_MB=${1:-100}
SENDS=${LOADTEST_SENDS:-20}
READS=${LOADTEST_READS:-50}

# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
pl_ensure_deps
export PATH=$PL_PG_BIN:$PATH
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh

WORK=$(mktemp -d)
LT_EXTRA_CLEANUP='kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"'
echo "==> starting the local cluster (release build)"
lt_start_cluster
ADMIN=$PACELINE_ADMIN_TOKEN

echo "==> one more API pod on :8788 (the one measured), and a ${SIZE_MB} MB file on loopback"
PACELINE_LISTEN_ADDR=127.0.0.1:8788 PACELINE_METRICS_ADDR=127.0.0.1:9475 PACELINE_LOG__LEVEL=warn \
    PACELINE_ALLOW_PRIVATE_TARGETS=1 PACELINE_LARGE_BODY__SLOTS=$SENDS PACELINE_LARGE_BODY__WAIT_MS=600000 \
    PACELINE_MEDIA__QUOTA_BYTES=$((4 * 1024 * 1024 * 1024)) \
    "$PACELINE_BIN" api >"$WORK/api.log" 2>&1 &
API_PID=$!
head -c $((SIZE_MB * 1024 * 1024)) /dev/urandom >"$WORK/big.pdf"
(cd "$WORK" && exec python3 -m http.server 8799 --bind 127.0.0.1 >/dev/null 2>&1) &
for _ in $(seq 1 100); do
    curl -sf http://127.0.0.1:8788/readyz >/dev/null 2>&1 && curl -sf -o /dev/null -r 0-0 http://127.0.0.1:8799/big.pdf && break
    sleep 0.2
done
API=http://127.0.0.1:8788
rss() { awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$API_PID/status"; }
peak() { awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/$API_PID/status"; }
echo "    API pod pid $API_PID, RSS at rest $(rss) MB"

echo "==> $SENDS concurrent sends of a ${SIZE_MB} MB media.url"
for i in $(seq 1 "$SENDS"); do
    curl -sf "$API/v1/instances" -H "Authorization: Bearer $ADMIN" -d "{\"name\": \"media-$i-$$\"}" >"$WORK/inst-$i.json"
done
ms() { echo $(($(date +%s%N) / 1000000)); }
secs_since() { python3 -c "print(f'{($(ms) - $1) / 1000:.1f}')"; }
start=$(ms)
pids=()
for i in $(seq 1 "$SENDS"); do
    read -r ID TOKEN < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["instance"]["id"], d["token"])' "$WORK/inst-$i.json")
    curl -s -o "$WORK/send-$i.json" -w '%{http_code}\n' "$API/v1/instances/$ID/messages" -H "Authorization: Bearer $TOKEN" \
        -d '{"to": "5511999990001", "type": "document", "media": {"url": "http://127.0.0.1:8799/big.pdf", "mime_type": "application/pdf"}}' \
        >"$WORK/send-$i.status" &
    pids+=($!)
done
wait "${pids[@]}"
send_secs=$(secs_since "$start")
ok=$(grep -c '^202$' "$WORK"/send-*.status | awk -F: '{s += $2} END {print s}')
echo "    $ok of $SENDS accepted in ${send_secs}s; peak RSS so far $(peak) MB"

echo "==> $READS concurrent reads of one ${SIZE_MB} MB media by signed URL"
MSG=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$WORK/send-1.json")
MEDIA=$(psql "$PACELINE_DATABASE_URL" -Atc "SELECT content->'media'->>'id' FROM messages WHERE id = '$MSG'")
URL=$(python3 - "$ADMIN" "$MEDIA" <<'PY'
import hashlib, hmac, sys, time
admin, media = sys.argv[1], sys.argv[2]
key = hmac.new(admin.encode(), b"paceline media url key v1", hashlib.sha256).digest()
exp = int(time.time()) + 3600
sig = hmac.new(key, f"{media}.{exp}".encode(), hashlib.sha256).hexdigest()
print(f"http://127.0.0.1:8788/media/{media}?exp={exp}&sig={sig}")
PY
)
start=$(ms)
pids=()
for i in $(seq 1 "$READS"); do
    curl -s -o /dev/null -w '%{http_code} %{size_download}\n' "$URL" >"$WORK/read-$i.out" &
    pids+=($!)
done
wait "${pids[@]}"
read_secs=$(secs_since "$start")
full=$(awk -v n=$((SIZE_MB * 1024 * 1024)) '$1 == 200 && $2 == n' "$WORK"/read-*.out | wc -l)
PEAK=$(peak)
echo "    $full of $READS read whole in ${read_secs}s"
echo
echo "API pod peak RSS: ${PEAK} MB (goal < 512 MB); sends: $ok/$SENDS in ${send_secs}s; reads: $full/$READS in ${read_secs}s"
echo "repeat: loadtest/media-memory.sh $SIZE_MB"
kill "$API_PID" 2>/dev/null || true
