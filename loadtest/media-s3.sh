#!/usr/bin/env bash
#
# loadtest/media-s3.sh [total_mb] [media_mb]
#
# Media through the cluster with the S3 backend, both ways a send takes it: starts an S3
# server (moto in server mode, from the test venv; or LOADTEST_S3_URL), a bucket, and the
# local cluster with media_store.backend = s3 (release build, warn logs, a schema of its
# own) without its worker; then one more API pod on :8788 and one `paceline worker`, the
# two processes measured. It pairs 16 netsim instances (unsafe pacing: 20 ms apart, risk
# policies off) and posts total_mb (default 2048) of documents of media_mb each (default
# 1) to POST {inst}/messages as media.url from a loopback file server,
# LOADTEST_CONCURRENCY (8) at a time: the API pod downloads each and streams it into the
# bucket, and the worker reads each object back to send it (netsim checks its hash). It
# prints accept and send throughput, the API pod's and the worker's peak RSS (VmHWM),
# Postgres's growth per table and per 1,000 media, the bucket's object count, and
# pgbench's single-row INSERT TPS from the same run. Load generator: media_s3.py (Python
# threads, urllib).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
TOTAL_MB=${1:-2048}
MEDIA_MB=${2:-1}

# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
pl_ensure_deps
pl_ensure_test_python
export PATH=$PL_PG_BIN:$PATH
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh

WORK=$(mktemp -d)
S3_PID=''
LT_EXTRA_CLEANUP='kill $(jobs -p) 2>/dev/null || true; [[ -n $S3_PID ]] && kill $S3_PID 2>/dev/null; rm -rf "$WORK"'
S3=${LOADTEST_S3_URL:-}
if [[ -z $S3 ]]; then
    echo "==> an S3 server: moto on :25991 (in memory)"
    "$PL_VENV/bin/moto_server" -H 127.0.0.1 -p 25991 >"$WORK/s3.log" 2>&1 &
    S3_PID=$!
    S3=http://127.0.0.1:25991
    for _ in $(seq 1 100); do curl -s -o /dev/null "$S3" && break; sleep 0.2; done
fi
BUCKET=paceline-bench-$$
curl -sf -X PUT "$S3/$BUCKET" >/dev/null
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-bench} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-bench-secret}
export PACELINE_MEDIA_STORE__BACKEND=s3 PACELINE_MEDIA_STORE__BUCKET=$BUCKET PACELINE_MEDIA_STORE__ENDPOINT=$S3
export PACELINE_MEDIA_STORE__PATH_STYLE=true PACELINE_ALLOW_PRIVATE_TARGETS=1
export PACELINE_MEDIA__QUOTA_BYTES=$((64 * 1024 * 1024 * 1024)) PACELINE_LARGE_BODY__SLOTS=16
export PACELINE_PACING__JITTER=0 PACELINE_PACING__RAMP_MS=0 PACELINE_PACING__GRACE_MIN_MS=0 PACELINE_PACING__GRACE_MAX_MS=0
export PACELINE_RISK__SLOWDOWN=1 PACELINE_RISK__AUTO_PAUSE=false PACELINE_RISK__HOLD_FIRST_CONTACTS=false
# A schema and prefixes of its own: its tables are what Postgres's growth is measured on.
lt_isolate ms3
export PL_DEV_ARGS=--no-worker

echo "==> starting the local cluster without a worker (release build, media in $S3/$BUCKET)"
lt_start_cluster
echo "==> one more API pod on :8788 and one worker: the processes measured"
PACELINE_LISTEN_ADDR=127.0.0.1:8788 PACELINE_METRICS_ADDR=127.0.0.1:9475 "$PACELINE_BIN" api >"$WORK/api.log" 2>&1 &
API_PID=$!
PACELINE_METRICS_ADDR=127.0.0.1:9476 "$PACELINE_BIN" worker >"$WORK/worker.log" 2>&1 &
WORKER_PID=$!
head -c $((MEDIA_MB * 1024 * 1024)) /dev/urandom >"$WORK/doc.pdf"
(cd "$WORK" && exec python3 -m http.server 8798 --bind 127.0.0.1 >/dev/null 2>&1) &
for _ in $(seq 1 100); do
    curl -sf http://127.0.0.1:8788/readyz >/dev/null 2>&1 && curl -sf -o /dev/null -r 0-0 http://127.0.0.1:8798/doc.pdf && break
    sleep 0.2
done
rss() { awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$1/status"; }
peak() { awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/$1/status"; }
sizes() {
    psql -Atc "CHECKPOINT" "$PACELINE_DATABASE_URL" >/dev/null 2>&1 || true
    psql -AtF ' ' -c "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname = '$RUN_TAG' AND c.relkind IN ('r', 'p')" "$PACELINE_DATABASE_URL"
}
sizes >"$WORK/before"
DB_BEFORE=$(psql -Atc "SELECT pg_database_size(current_database())" "$PACELINE_DATABASE_URL")

COUNT=$((TOTAL_MB / MEDIA_MB))
echo "    at rest: API pod $(rss $API_PID) MB, worker $(rss $WORKER_PID) MB"
echo "==> $COUNT documents of $MEDIA_MB MB by media.url, ${LOADTEST_CONCURRENCY:-8} at a time, to 16 paired instances"
MEDIA_MB=$MEDIA_MB python3 loadtest/media_s3.py http://127.0.0.1:8788 http://127.0.0.1:8790 "$PACELINE_ADMIN_TOKEN" "$COUNT" \
    http://127.0.0.1:8798/doc.pdf "${LOADTEST_CONCURRENCY:-8}"
sizes >"$WORK/after"
DB_AFTER=$(psql -Atc "SELECT pg_database_size(current_database())" "$PACELINE_DATABASE_URL")
ROWS=$(psql -Atc "SELECT count(*) FROM $RUN_TAG.media WHERE object_key IS NOT NULL" "$PACELINE_DATABASE_URL")
CHUNKS=$(psql -Atc "SELECT count(*) FROM $RUN_TAG.media_chunks" "$PACELINE_DATABASE_URL")
ROW_BYTES=$(psql -Atc "SELECT coalesce(round(avg(pg_column_size(m.*))), 0) FROM $RUN_TAG.media m" "$PACELINE_DATABASE_URL")
echo "    API pod peak RSS: $(peak $API_PID) MB; worker peak RSS: $(peak $WORKER_PID) MB"
echo "    media rows with an object: $ROWS (a row is $ROW_BYTES bytes on average); chunks in Postgres: $CHUNKS"
python3 - "$WORK/before" "$WORK/after" "$ROWS" "$DB_BEFORE" "$DB_AFTER" <<'PY'
import sys
def load(p):
    return {n: int(s) for n, s in (l.split() for l in open(p) if l.strip())}
before, after = load(sys.argv[1]), load(sys.argv[2])
rows, db_before, db_after = (int(x) for x in sys.argv[3:])
per_k = lambda b: b / 2**20 / max(rows, 1) * 1000
grew = {t: after[t] - before.get(t, 0) for t in after}
media = sum(g for t, g in grew.items() if t.startswith("media"))
print(f"    postgres, whole database: +{(db_after - db_before) / 2**20:.2f} MB ({per_k(db_after - db_before):.2f} MB per 1,000 media)")
print(f"    postgres, the media tables (media, media_chunks, media_object_deletions): +{media / 2**20:.2f} MB: "
      f"{per_k(media):.2f} MB per 1,000 media (goal < 1)")
print("    the tables that grew most (every send writes its message, events and log, media or not):")
for t, g in sorted(grew.items(), key=lambda x: -x[1])[:8]:
    if g > 0:
        print(f"      {t:<28} +{g / 2**20:6.2f} MB  {per_k(g):.2f} MB per 1,000")
PY
echo "    objects in the bucket: $(curl -sf "$S3/$BUCKET?list-type=2&max-keys=1000000" | grep -o '<Key>' | wc -l)"
echo "==> pgbench on the same Postgres (16 clients, 10 s)"
echo "    pgbench single-row INSERT: $(lt_pgbench_tps 16 10) tps"
kill "$API_PID" "$WORKER_PID" 2>/dev/null || true
psql -q -c "DROP SCHEMA $RUN_TAG CASCADE" "$PACELINE_DATABASE_URL" 2>/dev/null || true
echo "repeat: loadtest/media-s3.sh $TOTAL_MB $MEDIA_MB"
