#!/usr/bin/env bash
#
# loadtest/webhook-base64.sh
#
# A dispatcher's memory under Evolution `base64` webhooks (issue #32, item 1): 20 such
# webhooks (two each on ten tenants) on one URL that never answers, 40 received images of
# 9.5 MiB, and another tenant's ordinary webhook alongside. Runs the local cluster
# (release build, warn logs) without its dispatcher (`paceline dev --no-dispatcher`), and
# `paceline dispatcher` as a process of its own whose peak resident memory (VmHWM) is
# read from /proc; then pgbench on the same Postgres for the machine's scale.
# Orchestration: loadtest/webhook_base64.py (Python stdlib). TENANTS, IMAGES, IMAGE_MB
# and HOLD_SECS change the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
pl_ensure_deps
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
lt_isolate wb
# Both endpoints are on loopback; receiving needs no pacing.
export PACELINE_ALLOW_PRIVATE_TARGETS=true PL_DEV_ARGS=--no-dispatcher
echo "==> starting the local cluster without a dispatcher (release build)"
lt_start_cluster
python3 loadtest/webhook_base64.py

echo "==> pgbench: 64 clients, 30s, single-row INSERT of 1 KB on the same Postgres"
TPS=$(lt_pgbench_tps 64 30)
echo "    pgbench tps=$TPS"
echo "repeat: loadtest/webhook-base64.sh"
