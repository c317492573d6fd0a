#!/usr/bin/env bash
# The whole test suite, as the README gives it: starts the servers the
# integration tests use, all on free ports of 127.0.0.1 with their data in a
# temporary directory (a MinIO S3 server, the kfake Kafka-protocol broker,
# Redis, the Mosquitto MQTT broker, a PostgreSQL cluster and a NATS server
# with JetStream), installs what is missing (Debian's chromium, redis-server
# and mosquitto with apt-get; MinIO, kfake and nats-server built with Go),
# then runs gofmt, go vet and every test with -race. Tests that need a
# server find it through ARKFLOW_TEST_* variables; run without this script,
# they skip and say how to start it. Every server is stopped at exit.
#
# ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh CMD ARGS… starts the servers,
# runs CMD with their variables instead of the checks and tests, and stops
# them: e.g. ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh go test -race ./connectors/sql/
#
# Binaries are cached in ${ARKFLOW_CACHE:-$HOME/.cache/arkflow-go}: the
# first MinIO build takes about 4 minutes, nats-server's 1 to 3.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

cache=${ARKFLOW_CACHE:-$HOME/.cache/arkflow-go}
bin=$cache/bin
mkdir -p "$bin"
work=$(mktemp -d)
pids=()
stops=() # commands that stop daemonized servers (PostgreSQL)
cleanup() {
  for s in "${stops[@]}"; do eval "$s" >/dev/null 2>&1 || true; done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# --- MinIO (pinned in ../shared/design/architecture.md) ---------------------
minio_version=v0.0.0-20260212201848-7aac2a2c5b7c
minio=$bin/minio-$minio_version
if [ ! -x "$minio" ]; then
  echo "building MinIO $minio_version (about 4 minutes, cached afterwards)..."
  tmpbin=$(mktemp -d)
  GOBIN=$tmpbin GOFLAGS= go install "github.com/minio/minio@$minio_version"
  mv "$tmpbin/minio" "$minio"
  rm -rf "$tmpbin"
fi
export MINIO_ROOT_USER=arkflowtest MINIO_ROOT_PASSWORD=arkflowtestsecret
# A port free when probed can be taken before MinIO binds it (or be the
# console's too): start again on other ports when it says so.
start_minio() {
  minio_port=$(free_port)
  local console
  console=$(free_port)
  while [ "$console" = "$minio_port" ]; do console=$(free_port); done
  "$minio" server "$work/minio" --address "127.0.0.1:$minio_port" --console-address "127.0.0.1:$console" --quiet >"$work/minio.log" 2>&1 &
  minio_pid=$!
  pids+=($minio_pid)
}
start_minio
for attempt in 1 2 3; do
  sleep 0.5
  if kill -0 "$minio_pid" 2>/dev/null || ! grep -q "already in use" "$work/minio.log"; then break; fi
  echo "MinIO's port was taken; starting it on others (attempt $attempt)"
  start_minio
done

# --- kfake Kafka-protocol broker (pinned in .ci/kfake/go.mod) ----------------
kfake=$bin/kfake-$(sha256sum .ci/kfake/go.sum .ci/kfake/main.go | sha256sum | cut -c1-12)
if [ ! -x "$kfake" ]; then
  (cd .ci/kfake && GOFLAGS= go build -o "$kfake" .)
fi
"$kfake" >"$work/kfake.out" 2>"$work/kfake.log" &
pids+=($!)

# --- PostgreSQL's binaries: on PATH (/usr/local/bin links them on some
# machines), else Debian's under /usr/lib/postgresql, else Debian's package --
pgbin=
for d in "$(dirname "$(readlink -f "$(command -v pg_ctl || echo /nonexistent/pg_ctl)")")" /usr/lib/postgresql/*/bin; do
  if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/pg_isready" ]; then pgbin=$d; break; fi
done

# --- Debian packages: chromium (the Hub page's browser test), redis-server,
# mosquitto, postgresql; one apt-get for whatever is missing ----------------
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
mosquitto=$(command -v mosquitto || echo /usr/sbin/mosquitto)
[ -x "$mosquitto" ] || need+=(mosquitto)
[ -n "$pgbin" ] || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian's ${need[*]}..."
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -q "${need[@]}" >"$work/apt.log" 2>&1 ||
    { $sudo apt-get update -q >>"$work/apt.log" 2>&1 && $sudo apt-get install -y -q "${need[@]}" >>"$work/apt.log" 2>&1; } ||
    { echo "could not install ${need[*]}:"; tail -20 "$work/apt.log"; exit 1; }
  [ -n "$pgbin" ] || pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi
export ARKFLOW_TEST_CHROMIUM=$(command -v chromium)
# Screenshots of the page tests land here (not committed).
export ARKFLOW_TEST_ARTIFACTS=${ARKFLOW_TEST_ARTIFACTS:-$root/artifacts}

# --- nats-server (v2.15.3, built with Go like MinIO) --------------------------
nats_version=v2.15.3
nats=$bin/nats-server-$nats_version
if [ ! -x "$nats" ]; then
  echo "building nats-server $nats_version (about a minute, cached afterwards)..."
  tmpbin=$(mktemp -d)
  GOBIN=$tmpbin GOFLAGS= go install "github.com/nats-io/nats-server/v2@$nats_version"
  mv "$tmpbin/nats-server" "$nats"
  rm -rf "$tmpbin"
fi

# --- Redis, Mosquitto and NATS: started in the background, waited for below --
start_redis() {
  redis_port=$(free_port)
  redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
  redis_pid=$!
  pids+=($redis_pid)
}
start_mosquitto() {
  mqtt_port=$(free_port)
  # max_queued_messages 0: no limit (by default a disconnected persistent
  # session gets only 1,000 QoS 1 messages queued, the rest dropped).
  printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\nlog_dest stderr\n' "$mqtt_port" >"$work/mosquitto.conf"
  "$mosquitto" -c "$work/mosquitto.conf" >"$work/mosquitto.log" 2>&1 &
  mqtt_pid=$!
  pids+=($mqtt_pid)
}
start_nats() {
  nats_port=$(free_port)
  "$nats" -a 127.0.0.1 -p "$nats_port" -js -sd "$work/nats" >"$work/nats.log" 2>&1 &
  nats_pid=$!
  pids+=($nats_pid)
}
start_redis
start_mosquitto
start_nats

# --- PostgreSQL: a cluster in the temp dir, trust auth, TCP on 127.0.0.1 -----
# It runs as the postgres user (created when missing), as PostgreSQL refuses
# root. initdb's result is cached as a template, so later runs copy it
# instead (initdb takes seconds, a copy a fraction of one). fsync is off:
# the tests kill clients, never the server.
pg=$work/pg
mkdir -p "$pg"
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin postgres
  chmod 711 "$work" # the postgres user reaches its directory, nothing else
  chown postgres: "$pg"
  as_pg() { runuser -u postgres -- "$@"; }
else
  as_pg() { "$@"; }
fi
pgtemplate=$cache/pgdata-$("$pgbin/postgres" -V | sha256sum | cut -c1-12)
if [ -d "$pgtemplate" ]; then
  cp -a "$pgtemplate" "$pg/data"
else
  as_pg "$pgbin/initdb" -D "$pg/data" -U postgres --auth=trust -E UTF8 --locale=C --no-sync >"$work/initdb.log" 2>&1 ||
    { echo "initdb failed:"; cat "$work/initdb.log"; exit 1; }
  cp -a "$pg/data" "$pgtemplate.tmp.$$" && mv "$pgtemplate.tmp.$$" "$pgtemplate"
fi
stops+=("as_pg '$pgbin/pg_ctl' -D '$pg/data' -m immediate -s stop")
for attempt in 1 2 3; do
  pg_port=$(free_port)
  # -w waits until it accepts connections (or fails: then try other ports).
  if as_pg "$pgbin/pg_ctl" -D "$pg/data" -l "$pg/log" -s -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $pg -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"; then
    break
  fi
  grep -q "could not bind\|already in use" "$pg/log" || { echo "PostgreSQL did not start:"; tail -30 "$pg/log"; exit 1; }
  echo "PostgreSQL's port was taken; starting it on another (attempt $attempt)"
done
"$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pg_port" || { echo "PostgreSQL did not start:"; tail -30 "$pg/log"; exit 1; }

# Each answers its own protocol: Redis PONG, MQTT CONNACK, NATS an INFO line
# with JetStream on.
probe() { # PORT REQUEST BYTES: the first BYTES bytes of the answer to REQUEST (printf escapes), as hex
  timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "$2" >&3 && head -c "$3" <&3' _ "$@" 2>/dev/null | od -An -tx1 | tr -d ' \n'
}
redis_up() { [ "$(probe "$redis_port" 'PING\r\n' 5)" = 2b504f4e47 ]; }
mqtt_up() { [ "$(probe "$mqtt_port" '\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00' 4)" = 20020000 ]; }
nats_up() { timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && head -n1 <&3' _ "$nats_port" 2>/dev/null | grep -q '"jetstream":true'; }
# wait_for NAME UP START PID LOG: waits until UP succeeds; a server that
# exited (its port taken between the probe and its bind) starts again on
# another port.
wait_for() {
  local name=$1 up=$2 start=$3 pidvar=$4 log=$5
  for attempt in 1 2 3; do
    for _ in $(seq 1 200); do
      $up && return 0
      kill -0 "${!pidvar}" 2>/dev/null || break
      sleep 0.05
    done
    kill -0 "${!pidvar}" 2>/dev/null && break # running, not answering
    echo "$name exited; starting it on another port (attempt $attempt)"
    $start
  done
  echo "$name did not start:"; tail -30 "$log"; exit 1
}
wait_for Redis redis_up start_redis redis_pid "$work/redis.log"
wait_for Mosquitto mqtt_up start_mosquitto mqtt_pid "$work/mosquitto.log"
wait_for NATS nats_up start_nats nats_pid "$work/nats.log"

# Wait for MinIO and kfake.
for _ in $(seq 1 100); do
  if curl -sf "http://127.0.0.1:$minio_port/minio/health/ready" >/dev/null 2>&1 && grep -q '^ready ' "$work/kfake.out"; then
    break
  fi
  sleep 0.2
done
curl -sf "http://127.0.0.1:$minio_port/minio/health/ready" >/dev/null || { echo "MinIO did not start:"; cat "$work/minio.log"; exit 1; }
grep -q '^ready ' "$work/kfake.out" || { echo "kfake did not start:"; cat "$work/kfake.log"; exit 1; }

export ARKFLOW_TEST_S3_ENDPOINT=127.0.0.1:$minio_port
export ARKFLOW_TEST_S3_ACCESS_KEY=$MINIO_ROOT_USER
export ARKFLOW_TEST_S3_SECRET_KEY=$MINIO_ROOT_PASSWORD
export ARKFLOW_TEST_KAFKA_BROKERS=$(sed -n 's/^ready //p' "$work/kfake.out")
export ARKFLOW_TEST_REDIS_URL=redis://127.0.0.1:$redis_port
export ARKFLOW_TEST_MQTT_ADDR=127.0.0.1:$mqtt_port
export ARKFLOW_TEST_POSTGRES_DSN="postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable"
# The PostgreSQL binaries, for tests that start a cluster of their own (TLS).
export ARKFLOW_TEST_POSTGRES_BIN=$pgbin
export ARKFLOW_TEST_NATS_URL=nats://127.0.0.1:$nats_port
export ARKFLOW_TEST_NATS_SERVER=$nats # the TLS tests start servers of their own
echo "MinIO at $ARKFLOW_TEST_S3_ENDPOINT, kfake at $ARKFLOW_TEST_KAFKA_BROKERS, Redis at $ARKFLOW_TEST_REDIS_URL,"
echo "Mosquitto at $ARKFLOW_TEST_MQTT_ADDR, PostgreSQL at $ARKFLOW_TEST_POSTGRES_DSN, NATS at $ARKFLOW_TEST_NATS_URL"
if [ -n "${ARKFLOW_TEST_SERVERS_ONLY:-}" ]; then
  # Servers only: run a command with them (e.g. one package's tests), then stop them.
  "$@"
  exit
fi

# --- checks and tests --------------------------------------------------------
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.ci/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
go build ./...
go test -race -timeout 45m -count=1 ./... "$@"
# bench/ is a module of its own, which ./... does not reach: its Nexmark
# queries against their references (a few seconds).
(cd bench && go vet ./... && go test -race -count=1 ./...)
# The Beam side of the benchmarks (build tag beam): its pipelines' digests
# against the references. Without -race: the SDK and its runner are large.
(cd bench && go vet -tags beam ./... && go test -count=1 -tags beam -run Beam ./queries/)
# The README's other command: the quickstart must keep working.
go run ./examples/quickstart >/dev/null
echo "all tests passed"
