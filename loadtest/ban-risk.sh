#!/usr/bin/env bash
#
# loadtest/ban-risk.sh [ban_threshold] [sends]
#
# Ban risk against netsim's spam rule: runs the local cluster (release build, warn logs)
# twice, with the adaptive policies (risk_slowdown 2, first contacts held at high,
# risk_auto_pause) and without them (slowdown 1, no hold, no pause), each time pairing a
# spam-like instance (one text to strangers, half of them numbers without an account) and a conversational one (answers people who
# wrote first), `sends` (default 160) queued on each at one every 250 ms, with netsim
# banning an account past `ban_threshold` (default 40) first contacts an hour. Risk is
# evaluated every second. Reports per workload the sends that went out, whether netsim
# banned it (and after how many), and whether the gateway held or paused it first.
# Orchestration: loadtest/ban_risk.py (Python stdlib).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export BAN=${1:-40} SENDS=${2:-160}
# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
pl_ensure_deps
export PACELINE_PACING__RAMP_MS=0 PACELINE_PACING__GRACE_MIN_MS=0 PACELINE_PACING__GRACE_MAX_MS=0 PACELINE_RISK__INTERVAL_MS=1000
for MODE in adaptive off; do
    export MODE
    if [[ $MODE == off ]]; then
        export PACELINE_RISK__SLOWDOWN=1 PACELINE_RISK__AUTO_PAUSE=false PACELINE_RISK__HOLD_FIRST_CONTACTS=false
    else
        export PACELINE_RISK__SLOWDOWN=2 PACELINE_RISK__AUTO_PAUSE=true PACELINE_RISK__HOLD_FIRST_CONTACTS=true
    fi
    (
        # shellcheck source=loadtest/lib.sh
        source loadtest/lib.sh
        lt_isolate br
        echo "==> $MODE: starting the local cluster (release build)"
        lt_start_cluster
        python3 loadtest/ban_risk.py
    )
done
echo "repeat: loadtest/ban-risk.sh $BAN $SENDS"
