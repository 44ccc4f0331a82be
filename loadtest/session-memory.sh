#!/usr/bin/env bash
#
# loadtest/session-memory.sh [counts]
#
# Memory per real WhatsApp session: builds whatsapp-rust clients, each on its own
# instance's PgStore (its device created in and loaded from Postgres), and reports the
# process's resident memory per client at each count (default 1,100,1000). The clients
# cannot reach WhatsApp from here, so this is what a client holds with its store loaded,
# before any traffic. Runs the test wa_store::whatsapp_clients_on_pg_store_each_hold_under_a_megabyte
# through scripts/test (its services, debug build, no lint gate).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PACELINE_WA_MEMORY_CLIENTS=${1:-1,100,1000}
PL_TEST_NO_LINT=1 scripts/test -E 'test(whatsapp_clients_on_pg_store_each_hold_under_a_megabyte)' --no-capture
echo "repeat: loadtest/session-memory.sh $PACELINE_WA_MEMORY_CLIENTS"
