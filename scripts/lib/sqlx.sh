# shellcheck shell=bash
#
# The compile-time checked queries (sqlx's query! and query_as! in shared/src/db): every
# build reads their descriptions from shared/.sqlx (SQLX_OFFLINE=true in
# .cargo/config.toml), so it needs no database. These functions describe them again
# against a database migrated to this checkout:
#
#   pl_sqlx_queries write   rewrites shared/.sqlx (after changing a query or a migration);
#   pl_sqlx_queries check   fails when shared/.sqlx is stale (scripts/test runs it).
#
# Needs the services of scripts/lib/services.sh running ($PACELINE_DATABASE_URL, $PL_PG_BIN).

pl_sqlx_queries() {
    local mode=${1:-check} root db base out files
    root=$(pwd -P)
    base=${PACELINE_DATABASE_URL%/*}
    db=sqlx_describe
    export PGOPTIONS="-c client_min_messages=warning"
    local -a psql=("$PL_PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$base/postgres")
    "${psql[@]}" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null || return 1
    local m
    for m in "$root"/migrations/*.sql; do
        "$PL_PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$base/$db" -f "$m" >/dev/null || {
            printf 'paceline: error: migration %s failed on %s\n' "${m##*/}" "$db" >&2
            return 1
        }
    done
    out=$(mktemp -d)
    # The macros describe a query only when they expand: make the files that hold them
    # compile again.
    mapfile -t files < <(grep -rlE 'query(_as|_scalar)?!\(' shared/src)
    [[ ${#files[@]} -gt 0 ]] && touch "${files[@]}"
    if ! SQLX_OFFLINE=false DATABASE_URL="$base/$db" SQLX_OFFLINE_DIR="$out" \
        cargo check --locked -p paceline-shared --quiet; then
        rm -rf "$out"
        return 1
    fi
    case $mode in
        write)
            rm -rf shared/.sqlx
            mkdir -p shared/.sqlx
            cp "$out"/*.json shared/.sqlx/ 2>/dev/null || true
            printf 'paceline: shared/.sqlx: %s queries described\n' "$(find shared/.sqlx -name '*.json' | wc -l)" >&2
            ;;
        check)
            if ! diff -r "$out" shared/.sqlx >/dev/null 2>&1; then
                printf 'paceline: error: shared/.sqlx is stale (a query or a migration changed): run scripts/sqlx-prepare\n' >&2
                diff -rq "$out" shared/.sqlx >&2 || true
                rm -rf "$out"
                return 1
            fi
            ;;
    esac
    rm -rf "$out"
    "${psql[@]}" -c "DROP DATABASE IF EXISTS $db" >/dev/null || true
}
