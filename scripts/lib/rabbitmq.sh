# shellcheck shell=bash
#
# scripts/lib/rabbitmq.sh -- throwaway RabbitMQ nodes for the tests (Debian's
# rabbitmq-server, which pl_ensure_deps installs). Sourced by scripts/lib/services.sh,
# whose helpers it uses; defines:
#
#   pl_start_rabbitmq DATA_DIR PORT
#       Start the tests' node on 127.0.0.1:PORT (AMQP; guest/guest, loopback only) with
#       everything under DATA_DIR/rabbitmq and its output in DATA_DIR/logs/rabbitmq.log.
#       Exports PACELINE_TEST_AMQP_URL, PL_RABBITMQ_ENV (the node's env file) and
#       PL_RABBITMQ_CTL (scripts/lib/rabbitmq-node, which stops and starts it by that
#       file). pl_stop_services stops it, and any other node under DATA_DIR/rabbitmq.
#
# A node is a directory holding node.env, the file every command sources: HOME (the
# Erlang cookie), RABBITMQ_NODENAME, its config, data, log and pid files, and the
# distribution ports, so the node and the CLI (rabbitmqctl) never meet a system-wide
# RabbitMQ or epmd (its own epmd on PL_TEST_EPMD_PORT). The broker runs as the
# calling user (root in CI): Debian's /usr/sbin wrappers, which switch to the rabbitmq
# user and use /var/lib/rabbitmq, are not used.
#
# Environment knobs:
#   PL_TEST_RABBITMQ_DIST_PORT  the node's Erlang distribution port (default PORT+1)
#   PL_TEST_EPMD_PORT           the epmd the nodes register with (default 24369)
#   PL_RABBITMQ_STOP_TIMEOUT    seconds between SIGTERM and SIGKILL on stop (default 30)

_PL_RABBITMQ_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
PL_RABBITMQ_SBIN=${PL_RABBITMQ_SBIN:-/usr/lib/rabbitmq/bin}

# _pl_rabbitmq_init NODE_DIR AMQP_PORT DIST_PORT NODENAME LOG: writes the node's config
# and NODE_DIR/node.env (data kept: a node keeps what it held across stop and start).
_pl_rabbitmq_init() {
    local dir=$1 port=$2 dist=$3 name=$4 log=$5 epmd=${PL_TEST_EPMD_PORT:-24369} v
    mkdir -p "$dir/home" "$dir/mnesia" "$dir/log" "$(dirname "$log")" || return 1
    dir=$(cd "$dir" && pwd -P) || return 1
    if [[ ! -s $dir/home/.erlang.cookie ]]; then
        # The node and rabbitmqctl both read $HOME/.erlang.cookie.
        (umask 077 && printf 'paceline-test-%s' "$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')" \
            >"$dir/home/.erlang.cookie") || return 1
        chmod 400 "$dir/home/.erlang.cookie" || return 1
    fi
    # No plugins (no management UI); console logging only (to LOG); a small disk alarm
    # threshold, so a nearly full CI disk does not block publishers.
    printf '[].\n' >"$dir/enabled_plugins" || return 1
    : >"$dir/rabbitmq-env.conf" || return 1
    cat >"$dir/rabbitmq.conf" <<EOF || return 1
listeners.tcp.1 = 127.0.0.1:$port
loopback_users.guest = true
log.file = false
log.console = true
log.console.level = info
log.console.use_colors = off
disk_free_limit.absolute = 1MB
EOF
    {
        printf '# A RabbitMQ test node, written by scripts/lib/rabbitmq.sh: sourced by\n'
        printf '# scripts/lib/rabbitmq-node (start, stop, status, ctl ...).\n'
        for v in \
            "PL_RABBITMQ_DIR=$dir" \
            "PL_RABBITMQ_PORT=$port" \
            "PL_RABBITMQ_LOG=$log" \
            "HOME=$dir/home" \
            "RABBITMQ_NODENAME=$name" \
            "RABBITMQ_CONF_ENV_FILE=$dir/rabbitmq-env.conf" \
            "RABBITMQ_CONFIG_FILE=$dir/rabbitmq.conf" \
            "RABBITMQ_ADVANCED_CONFIG_FILE=$dir/advanced.config" \
            "RABBITMQ_ENABLED_PLUGINS_FILE=$dir/enabled_plugins" \
            "RABBITMQ_MNESIA_BASE=$dir/mnesia" \
            "RABBITMQ_LOG_BASE=$dir/log" \
            "RABBITMQ_PID_FILE=$dir/beam.pid" \
            "RABBITMQ_DIST_PORT=$dist" \
            "RABBITMQ_CTL_DIST_PORT_MIN=$((epmd + 1))" \
            "RABBITMQ_CTL_DIST_PORT_MAX=$((epmd + 20))" \
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}" \
            "ERL_EPMD_PORT=$epmd" \
            "ERL_EPMD_ADDRESS=127.0.0.1" \
            "ERL_CRASH_DUMP=$dir/erl_crash.dump"; do
            printf 'export %s=%q\n' "${v%%=*}" "${v#*=}"
        done
    } >"$dir/node.env.tmp" && mv "$dir/node.env.tmp" "$dir/node.env"
}

# The node's env into this shell (callers are subshells).
_pl_rabbitmq_load() {
    if [[ ! -f $1 ]]; then
        _pl_err "no RabbitMQ node env file at '$1'"
        return 1
    fi
    # shellcheck source=/dev/null
    source "$1"
}

# The broker's pid if it runs: the rabbitmq-server script (parent of beam.smp), else
# beam.smp alone (its script killed). A pid file whose process is gone, or is no node of
# this directory, does not count.
_pl_rabbitmq_pid() {
    local f pid
    for f in "$PL_RABBITMQ_DIR/server.pid" "$RABBITMQ_PID_FILE"; do
        pid=$(cat "$f" 2>/dev/null) || continue
        if _pl_rabbitmq_ours "$pid"; then
            printf '%s\n' "$pid"
            return 0
        fi
    done
    return 1
}

# PID runs with this node's environment.
_pl_rabbitmq_ours() {
    _pl_alive "$1" || return 1
    tr '\0' '\n' 2>/dev/null <"/proc/$1/environ" | grep -qxF "RABBITMQ_MNESIA_BASE=$PL_RABBITMQ_DIR/mnesia"
}

# The node answers the AMQP protocol header on PORT with a frame (Connection.Start).
_pl_rabbitmq_ready() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'AMQP\x00\x00\x09\x01' >&3 &&
        IFS= read -r -t 2 -n 1 -d '' b <&3 && [[ $b == $'\x01' ]]) 2>/dev/null
}

# _pl_rabbitmq_start ENV_FILE: start the node (in the background, detached from the
# caller) unless it runs; wait until it accepts AMQP connections.
_pl_rabbitmq_start() (
    _pl_rabbitmq_load "$1" || exit 1
    local pid t0=$SECONDS
    if pid=$(_pl_rabbitmq_pid); then
        _pl_wait_ready "rabbitmq $RABBITMQ_NODENAME (port $PL_RABBITMQ_PORT)" "$pid" "$PL_RABBITMQ_LOG" \
            _pl_rabbitmq_ready "$PL_RABBITMQ_PORT" || exit 1
        _pl_log "rabbitmq $RABBITMQ_NODENAME already runs (pid $pid, port $PL_RABBITMQ_PORT)"
        exit 0
    fi
    _pl_check_port_free "rabbitmq (amqp)" "$PL_RABBITMQ_PORT" || exit 1
    _pl_check_port_free "rabbitmq (erlang distribution)" "$RABBITMQ_DIST_PORT" || exit 1
    if [[ ! -x $PL_RABBITMQ_SBIN/rabbitmq-server ]]; then
        _pl_err "$PL_RABBITMQ_SBIN/rabbitmq-server is missing: install Debian's rabbitmq-server (pl_ensure_deps does)"
        exit 1
    fi
    rm -f "$RABBITMQ_PID_FILE"
    printf '==== %s: starting rabbitmq %s on 127.0.0.1:%s ====\n' "$(date '+%F %T')" "$RABBITMQ_NODENAME" \
        "$PL_RABBITMQ_PORT" >>"$PL_RABBITMQ_LOG"
    # Without job control: setsid, so the node outlives the caller (a test's ctl call).
    set +m
    _pl_spawn "$PL_RABBITMQ_LOG" "$PL_RABBITMQ_DIR" "$PL_RABBITMQ_SBIN/rabbitmq-server"
    pid=$_PL_SPAWNED_PID
    printf '%s\n' "$pid" >"$PL_RABBITMQ_DIR/server.pid"
    _pl_wait_ready "rabbitmq $RABBITMQ_NODENAME (port $PL_RABBITMQ_PORT)" "$pid" "$PL_RABBITMQ_LOG" \
        _pl_rabbitmq_ready "$PL_RABBITMQ_PORT" || exit 1
    _pl_log "rabbitmq $RABBITMQ_NODENAME up on :$PL_RABBITMQ_PORT (pid $pid) in $((SECONDS - t0))s; log $PL_RABBITMQ_LOG"
)

# _pl_rabbitmq_stop ENV_FILE [TERM|KILL]: stop the node and wait until it is gone and
# its port refuses connections. TERM is RabbitMQ's orderly shutdown (what it held is
# kept); KILL is a crash (durable queues and persistent messages are recovered).
_pl_rabbitmq_stop() (
    _pl_rabbitmq_load "$1" || exit 1
    local sig=${2:-TERM} pid beam deadline
    pid=$(_pl_rabbitmq_pid) || pid=''
    # beam.smp's own pid, which RabbitMQ writes (without a newline) once it boots.
    beam=$(cat "$RABBITMQ_PID_FILE" 2>/dev/null) || beam=''
    _pl_rabbitmq_ours "$beam" || beam=''
    if [[ -z $pid$beam ]]; then
        rm -f "$PL_RABBITMQ_DIR/server.pid"
        exit 0
    fi
    if [[ $sig == KILL ]]; then
        [[ -n $beam ]] && kill -s KILL "$beam" 2>/dev/null
        [[ -n $pid ]] && kill -s KILL "$pid" 2>/dev/null
    fi
    if [[ -n $pid ]]; then
        _pl_terminate "$pid" "rabbitmq $RABBITMQ_NODENAME" TERM "${PL_RABBITMQ_STOP_TIMEOUT:-30}"
    elif [[ -n $beam ]]; then
        # beam.smp without its script (which was killed): it too stops in order on TERM.
        _pl_terminate "$beam" "rabbitmq $RABBITMQ_NODENAME (beam.smp)" TERM "${PL_RABBITMQ_STOP_TIMEOUT:-30}"
    fi
    # The script gone (SIGKILLed after the timeout) but beam.smp not yet: kill it too.
    [[ -n $beam ]] && _pl_alive "$beam" && kill -s KILL "$beam" 2>/dev/null
    deadline=$((SECONDS + 10))
    while [[ -n $beam ]] && _pl_alive "$beam" && [[ $SECONDS -lt $deadline ]]; do
        sleep 0.1
    done
    while _pl_port_listening "$PL_RABBITMQ_PORT"; do
        if [[ $SECONDS -ge $deadline ]]; then
            _pl_err "rabbitmq $RABBITMQ_NODENAME stopped but port $PL_RABBITMQ_PORT is still listening"
            exit 1
        fi
        sleep 0.1
    done
    rm -f "$PL_RABBITMQ_DIR/server.pid" "$RABBITMQ_PID_FILE"
    printf '==== %s: rabbitmq %s stopped (%s) ====\n' "$(date '+%F %T')" "$RABBITMQ_NODENAME" "$sig" \
        >>"$PL_RABBITMQ_LOG"
)

# _pl_rabbitmq_status ENV_FILE: prints running/starting/stopped; exit 0, 1 or 3.
_pl_rabbitmq_status() (
    _pl_rabbitmq_load "$1" || exit 1
    local pid
    if ! pid=$(_pl_rabbitmq_pid); then
        printf 'stopped\n'
        exit 3
    fi
    if _pl_rabbitmq_ready "$PL_RABBITMQ_PORT"; then
        printf 'running pid %s port %s node %s\n' "$pid" "$PL_RABBITMQ_PORT" "$RABBITMQ_NODENAME"
        exit 0
    fi
    printf 'starting pid %s port %s node %s\n' "$pid" "$PL_RABBITMQ_PORT" "$RABBITMQ_NODENAME"
    exit 1
)

# Stop every node under DIR (the tests' node and the ones tests made for themselves,
# DIR/private/*), e.g. left running by a test or an earlier run that was killed.
_pl_rabbitmq_stop_all() {
    local dir=$1 env
    for env in "$dir/node.env" "$dir"/private/*/node.env; do
        [[ -f $env ]] || continue
        _pl_rabbitmq_stop "$env" TERM || true
    done
}

pl_start_rabbitmq() {
    if [[ $# -ne 2 ]]; then
        _pl_err "usage: pl_start_rabbitmq DATA_DIR PORT"
        return 2
    fi
    local data_dir=$1 port=$2 dist epmd p
    dist=${PL_TEST_RABBITMQ_DIST_PORT:-$((port + 1))}
    epmd=${PL_TEST_EPMD_PORT:-24369}
    for p in "$port" "$dist" "$epmd"; do
        if ! [[ $p =~ ^[0-9]+$ ]] || [[ $p -lt 1 || $p -gt 65535 ]]; then
            _pl_err "invalid port: '$p'"
            return 2
        fi
    done
    if [[ $port == "$dist" || $port == "$epmd" || $dist == "$epmd" ]]; then
        _pl_err "ports must differ (amqp $port, distribution $dist, epmd $epmd)"
        return 2
    fi
    mkdir -p "$data_dir/logs" "$data_dir/rabbitmq" || return 1
    data_dir=$(cd "$data_dir" && pwd -P) || return 1
    _pl_rabbitmq_stop_all "$data_dir/rabbitmq"
    _pl_rabbitmq_init "$data_dir/rabbitmq" "$port" "$dist" paceline-test@localhost \
        "$data_dir/logs/rabbitmq.log" || return 1
    _PL_RABBITMQ_DIR=$data_dir/rabbitmq
    _pl_rabbitmq_start "$data_dir/rabbitmq/node.env" || return 1
    PL_RABBITMQ_ENV=$data_dir/rabbitmq/node.env
    PL_RABBITMQ_CTL=$_PL_RABBITMQ_LIB/rabbitmq-node
    export PL_RABBITMQ_ENV PL_RABBITMQ_CTL
    export PACELINE_TEST_AMQP_URL="amqp://guest:guest@127.0.0.1:$port/%2f"
}

# pl_stop_services' part: the nodes, then the epmd the first of them started.
_pl_stop_rabbitmq() {
    local dir=${_PL_RABBITMQ_DIR:-} epmd
    [[ -n $dir ]] || return 0
    _PL_RABBITMQ_DIR=''
    _pl_rabbitmq_stop_all "$dir"
    if epmd=$(command -v epmd); then
        # Refused (and harmless) while some node is still registered with it.
        ERL_EPMD_PORT=${PL_TEST_EPMD_PORT:-24369} "$epmd" -kill >/dev/null 2>&1 || true
    fi
    return 0
}
