#!/usr/bin/env bash
#
# loadtest/chaos.sh [seconds] [instances] [workers]
#
# The chaos run of the test suite, for as long as asked (default 1800 s, 20 instances,
# 3 workers): workers, two API pods and two dispatchers as processes (debug build, as the
# tests run them), a NATS and a Redis of the run's own, netsim in process. A fault every
# 3 s in turn: kill -9 a worker, netsim errors and latency, kill -9 an API pod, restart
# NATS, kill -9 a dispatcher, restart Redis, netsim dropping every connection. Sends flow
# through both API pods meanwhile, with webhooks registered. Then it checks that every
# accepted message ended sent or failed with a reason, netsim received each network id
# once, every event reached its webhook and is in the delivery log once, and no lease
# epoch was claimed twice; and prints the figures. The code is tests/src/chaos.rs; the
# services are the test command's (scripts/test, without its lint gate).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PACELINE_CHAOS_SECONDS=${1:-1800} PACELINE_CHAOS_INSTANCES=${2:-20} PACELINE_CHAOS_WORKERS=${3:-3}
PL_TEST_NO_LINT=1 scripts/test -E 'test(/^chaos::/)' --no-capture
echo "repeat: loadtest/chaos.sh $PACELINE_CHAOS_SECONDS $PACELINE_CHAOS_INSTANCES $PACELINE_CHAOS_WORKERS"
