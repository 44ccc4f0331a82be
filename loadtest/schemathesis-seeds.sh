#!/usr/bin/env bash
#
# loadtest/schemathesis-seeds.sh [runs] [examples]
#
# Schemathesis (the test venv's, with every check) over the served OpenAPI description,
# as the admin and as an instance token, `runs` times (default 3) with a random seed each
# and `examples` (default 30) examples per operation: what a new user trying the
# description would do. The suite runs one fixed seed (tests/it/schemathesis.rs); this
# tries others. Prints each run's seed and result; `SEED=<n>` repeats one. Exits non-zero
# when any run finds something. Starts the local cluster (debug build unless
# LT_PROFILE=release) with services/paceline/tests/schemathesis.toml's exemptions.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS=${1:-3} EXAMPLES=${2:-30}
# shellcheck source=scripts/lib/services.sh
source scripts/lib/services.sh
pl_ensure_deps
pl_ensure_test_python
export LT_PROFILE=${LT_PROFILE:-debug}
# shellcheck source=loadtest/lib.sh
source loadtest/lib.sh
lt_isolate st
echo "==> starting the local cluster ($LT_PROFILE build)"
lt_start_cluster
ADMIN=$PACELINE_ADMIN_TOKEN
API=http://127.0.0.1:8787
ST=$(dirname "$PL_TEST_PYTHON")/st
CONFIG=services/paceline/tests/schemathesis.toml
REPORTS=$(mktemp -d)
failed=0

# One pass: schemathesis as `token` on instance ($1 id, $2 name), excluding $@ too.
pass() {
    local who=$1 token=$2 id=$3 name=$4 seed=$5
    shift 5
    local -a excludes=(--exclude-operation-id instances_delete --exclude-operation-id evolution_instance_delete)
    for op in "$@"; do excludes+=(--exclude-operation-id "$op"); done
    local report=$REPORTS/$seed-$who.txt
    if PACELINE_ST_INSTANCE_ID=$id PACELINE_ST_INSTANCE_NAME=$name "$ST" --config-file "$CONFIG" run "$API/v1/openapi.json" \
        -H "Authorization: Bearer $token" -H "X-API-Key: $token" --checks all --max-examples "$EXAMPLES" \
        --seed "$seed" --workers 1 --no-color --exclude-path /mcp "${excludes[@]}" >"$report" 2>&1; then
        printf '    seed %s as %-8s clean (%s)\n' "$seed" "$who" "$(grep -m1 'generated' "$report" | xargs)"
    else
        printf '    seed %s as %-8s FOUND PROBLEMS: %s\n' "$seed" "$who" "$report"
        sed -n '/FAILURES/,/Reproduce with/p' "$report" | grep -E '^_{3,}|^ +- |Invalid component|^\s+\[[0-9]{3}\]' | head -40
        failed=1
    fi
}

for run in $(seq 1 "$RUNS"); do
    seed=${SEED:-$(( (RANDOM << 15 | RANDOM) ))}
    inst=$(curl -sf "$API/v1/instances" -H "Authorization: Bearer $ADMIN" -d "{\"name\": \"st-$seed-$run\"}")
    id=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["instance"]["id"])' <<<"$inst")
    token=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])' <<<"$inst")
    echo "==> run $run of $RUNS: seed $seed, $EXAMPLES examples per operation"
    pass admin "$ADMIN" "$id" "st-$seed-$run" "$seed"
    # Its own token may delete its instance or lock itself out with an allow-list.
    pass instance "$token" "$id" "st-$seed-$run" "$seed" instances_patch
done
echo "reports in $REPORTS"
echo "repeat one: SEED=<seed> loadtest/schemathesis-seeds.sh 1 $EXAMPLES"
exit "$failed"
