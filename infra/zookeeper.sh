#!/usr/bin/env bash
# Starts a standalone ZooKeeper (Debian's `zookeeper` package) without systemd.
#
#   infra/zookeeper.sh [--port 2181] [--data-dir DIR] [--tick-time MS] [--heap 256m]
#                      [--tls-dir DIR] [--wait SECONDS] [--foreground]
#   infra/zookeeper.sh stop --data-dir DIR
#
# --tls-dir DIR makes PORT a TLS-only port (secureClientPort, Netty): no plaintext port is
# opened.  DIR holds ca.pem (the CA clients verify the server with, --zk-tls-ca) and
# server.pem (the server's key and certificate); when they are missing a private CA and a
# certificate for localhost / 127.0.0.1 are made with openssl (keys mode 0600).
#
# Writes DIR/zoo.cfg, starts the server bound to 127.0.0.1:PORT and prints its PID on
# stdout (also written to DIR/zookeeper.pid); the server's own output goes to
# DIR/zookeeper.log.  With --wait (default 20 s) it returns only once the server answers
# `ruok` with `imok`, and fails otherwise.  --foreground execs java in place instead
# (the caller's PID is then the server's; used by the pytest fixture).
#
# Install the package first with `bash infra/install-system-deps.sh`.  Sessions may last
# between 2 and 20 ticks, so tests use a short --tick-time for short session timeouts.
set -euo pipefail

port=2181
data_dir=""
tick_time=2000
heap=256m
wait_secs=20
tls_dir=""
foreground=0
action=start

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

if [ "${1:-}" = "stop" ] || [ "${1:-}" = "start" ]; then
    action=$1
    shift
fi
while [ $# -gt 0 ]; do
    case "$1" in
        --port) port=$2; shift 2 ;;
        --data-dir) data_dir=$2; shift 2 ;;
        --tick-time) tick_time=$2; shift 2 ;;
        --heap) heap=$2; shift 2 ;;
        --wait) wait_secs=$2; shift 2 ;;
        --tls-dir) tls_dir=$2; shift 2 ;;
        --foreground) foreground=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "zookeeper.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done

if [ -z "$data_dir" ]; then
    data_dir=$(mktemp -d "${TMPDIR:-/tmp}/linkstream-zk.XXXXXX")
fi
mkdir -p "$data_dir"
data_dir=$(cd "$data_dir" && pwd)
pid_file="$data_dir/zookeeper.pid"

if [ "$action" = "stop" ]; then
    if [ ! -f "$pid_file" ]; then
        echo "zookeeper.sh: no $pid_file" >&2
        exit 1
    fi
    pid=$(cat "$pid_file")
    if kill "$pid" 2>/dev/null; then
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pid_file"
    exit 0
fi

zk_jar=/usr/share/java/zookeeper.jar
if [ ! -f "$zk_jar" ] || ! command -v java >/dev/null 2>&1; then
    echo "zookeeper.sh: $zk_jar or java missing; run: bash infra/install-system-deps.sh" >&2
    exit 1
fi

# zookeeper.jar's manifest Class-Path already names its Debian dependencies (netty,
# jetty, jackson, slf4j-api, ...).  No SLF4J binding is installed with it, so add the
# simple one to get warnings on stderr (into zookeeper.log) rather than nothing.
classpath="$zk_jar"
if [ -f /usr/share/java/slf4j-simple.jar ]; then
    classpath="$classpath:/usr/share/java/slf4j-simple.jar"
fi

make_tls() {
    # A private CA and a server certificate for this host (what a local cluster uses).
    local dir=$1
    command -v openssl >/dev/null 2>&1 || { echo "zookeeper.sh: --tls-dir needs openssl" >&2; exit 1; }
    (
        umask 077
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=linkstream-zookeeper-ca" \
            -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
            -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
        printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
            "extendedKeyUsage=serverAuth" >"$dir/server.ext"
        openssl x509 -req -days 3650 -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
            -CAcreateserial -extfile "$dir/server.ext" -out "$dir/server.crt" 2>/dev/null
        cat "$dir/server.key" "$dir/server.crt" >"$dir/server.pem"
        rm -f "$dir/server.csr" "$dir/server.ext" "$dir/server.key" "$dir/ca.srl"
    )
    chmod 644 "$dir/ca.pem"
}

if [ -n "$tls_dir" ]; then
    mkdir -p "$tls_dir"
    tls_dir=$(cd "$tls_dir" && pwd)
    if [ ! -f "$tls_dir/ca.pem" ] || [ ! -f "$tls_dir/server.pem" ]; then
        make_tls "$tls_dir"
    fi
    # Netty serves TLS; zookeeper.jar's manifest names netty's handler but not its codec
    for jar in netty-codec netty-resolver; do
        classpath="$classpath:/usr/share/java/$jar.jar"
    done
    port_cfg="secureClientPort=$port
secureClientPortAddress=127.0.0.1
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=$tls_dir/server.pem
ssl.keyStore.type=PEM
ssl.trustStore.location=$tls_dir/ca.pem
ssl.trustStore.type=PEM
ssl.clientAuth=none"
else
    port_cfg="clientPort=$port
clientPortAddress=127.0.0.1"
fi

cat >"$data_dir/zoo.cfg" <<EOF
tickTime=$tick_time
dataDir=$data_dir/data
$port_cfg
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr,envi,stat,cons
EOF
mkdir -p "$data_dir/data"

java_args=(
    "-Xmx$heap"
    -XX:+UseSerialGC
    -Djava.net.preferIPv4Stack=true
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn
    -Dzookeeper.jmx.log4j.disable=true
    -cp "$classpath"
    org.apache.zookeeper.server.quorum.QuorumPeerMain
    "$data_dir/zoo.cfg"
)

if [ "$foreground" = 1 ]; then
    echo $$ >"$pid_file"
    exec java "${java_args[@]}"
fi

nohup java "${java_args[@]}" </dev/null >>"$data_dir/zookeeper.log" 2>&1 &
pid=$!
echo "$pid" >"$pid_file"

four_letter() {
    # One four-letter-word round trip (over bash's /dev/tcp, or openssl on a TLS port).
    if [ -n "$tls_dir" ]; then
        printf '%s' "$1" | timeout 2 openssl s_client -quiet -connect "127.0.0.1:$port" \
            -CAfile "$tls_dir/ca.pem" -verify_return_error 2>/dev/null || true
        return
    fi
    ( exec 3<>"/dev/tcp/127.0.0.1/$port" && printf '%s' "$1" >&3 && timeout 1 cat <&3 ) 2>/dev/null || true
}

ready() {
    # `ruok` answers imok as soon as the process runs; `srvr` tells whether it serves.
    [ "$(four_letter ruok)" = "imok" ] && ! four_letter srvr | grep -q "not currently serving"
}

if [ "$wait_secs" != 0 ]; then
    deadline=$((SECONDS + wait_secs))
    until ready; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "zookeeper.sh: server exited; see $data_dir/zookeeper.log" >&2
            tail -n 20 "$data_dir/zookeeper.log" >&2 || true
            exit 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "zookeeper.sh: no imok on 127.0.0.1:$port after ${wait_secs}s" >&2
            kill "$pid" 2>/dev/null || true
            exit 1
        fi
        sleep 0.1
    done
fi
echo "$pid"
