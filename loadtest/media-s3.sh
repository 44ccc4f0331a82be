#!/usr/bin/env bash
#
# loadtest/media-s3.sh [total_mb] [media_mb]
#
# Media through the cluster with the S3 backend: starts an S3 server (moto in server
# mode, from the test venv; or LOADTEST_S3_URL), a bucket, and the local cluster with
# media_store.backend = s3 (release build, warn logs); then posts total_mb (default 2048)
# of documents of media_mb each (default 1) to POST {inst}/messages as media.url from a
# loopback file server, LOADTEST_CONCURRENCY (8) at a time over 8 unpaired instances
# (the accept path: download, stream into the bucket, queue). Prints throughput, the
# node's peak RSS (VmHWM; scripts/dev runs api, worker and dispatcher in one process),
# Postgres's size before and after (and per 1,000 media), the bucket's object count,
# and pgbench's single-row INSERT TPS from the same run. Load generator: media_s3.py
# (Python threads, urllib).
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

echo "==> starting the local cluster (release build, media in $S3/$BUCKET)"
lt_start_cluster
NODE=$(pgrep -f "paceline dev --network" | head -n 1)
pgsize() { psql -Atc "CHECKPOINT" "$PACELINE_DATABASE_URL" >/dev/null 2>&1 || true
    psql -Atc "SELECT pg_database_size(current_database())" "$PACELINE_DATABASE_URL"; }
BEFORE=$(pgsize)
head -c $((MEDIA_MB * 1024 * 1024)) /dev/urandom >"$WORK/doc.pdf"
(cd "$WORK" && exec python3 -m http.server 8798 --bind 127.0.0.1 >/dev/null 2>&1) &
for _ in $(seq 1 50); do curl -sf -o /dev/null -r 0-0 http://127.0.0.1:8798/doc.pdf && break; sleep 0.2; done

COUNT=$((TOTAL_MB / MEDIA_MB))
echo "==> $COUNT documents of $MEDIA_MB MB by media.url, ${LOADTEST_CONCURRENCY:-8} at a time"
MEDIA_MB=$MEDIA_MB python3 loadtest/media_s3.py http://127.0.0.1:8787 "$PACELINE_ADMIN_TOKEN" "$COUNT" \
    http://127.0.0.1:8798/doc.pdf "${LOADTEST_CONCURRENCY:-8}"
AFTER=$(pgsize)
PEAK=$(awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/$NODE/status")
ROWS=$(psql -Atc "SELECT count(*) FROM media WHERE object_key IS NOT NULL" "$PACELINE_DATABASE_URL")
CHUNKS=$(psql -Atc "SELECT count(*) FROM media_chunks" "$PACELINE_DATABASE_URL")
echo "    node (api + worker + dispatcher) peak RSS: $PEAK MB"
echo "    media rows with an object: $ROWS; chunks in Postgres: $CHUNKS"
python3 - "$BEFORE" "$AFTER" "$ROWS" <<'PY'
import sys
before, after, rows = (int(x) for x in sys.argv[1:])
grew = after - before
print(f"    postgres: {before / 2**20:.1f} MB before, {after / 2**20:.1f} MB after: "
      f"+{grew / 2**20:.2f} MB, {grew / 2**20 / max(rows, 1) * 1000:.2f} MB per 1,000 media (goal < 1)")
PY
echo "==> pgbench on the same Postgres (16 clients, 10 s)"
echo "    pgbench single-row INSERT: $(lt_pgbench_tps 16 10) tps"
