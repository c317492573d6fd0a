#!/usr/bin/env bash
# The whole test suite, as the README gives it: starts the servers the
# integration tests use (a MinIO S3 server and the kfake Kafka-protocol
# broker, both on 127.0.0.1), installs Debian's chromium with apt-get when
# missing (the Hub page's browser test), then runs gofmt, go vet and every
# test with -race. Tests that need a server find it through ARKFLOW_TEST_* variables;
# run without this script, they skip and say how to start it.
#
# Binaries are cached in ${ARKFLOW_CACHE:-$HOME/.cache/arkflow-go}: the
# first MinIO build takes about 4 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

cache=${ARKFLOW_CACHE:-$HOME/.cache/arkflow-go}
bin=$cache/bin
mkdir -p "$bin"
work=$(mktemp -d)
pids=()
cleanup() {
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

# --- Chromium for the Hub page's browser test (Debian's package) ------------
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium for the Hub page test..."
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -q chromium >"$work/apt.log" 2>&1 ||
    { $sudo apt-get update -q >>"$work/apt.log" 2>&1 && $sudo apt-get install -y -q chromium >>"$work/apt.log" 2>&1; } ||
    { echo "could not install chromium:"; tail -20 "$work/apt.log"; exit 1; }
fi
export ARKFLOW_TEST_CHROMIUM=$(command -v chromium)
# Screenshots of the page tests land here (not committed).
export ARKFLOW_TEST_ARTIFACTS=${ARKFLOW_TEST_ARTIFACTS:-$root/artifacts}

# Wait for both.
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
echo "MinIO at $ARKFLOW_TEST_S3_ENDPOINT, kfake at $ARKFLOW_TEST_KAFKA_BROKERS"

# --- checks and tests --------------------------------------------------------
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.ci/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
go build ./...
go test -race -timeout 45m -count=1 ./... "$@"
# The README's other command: the quickstart must keep working.
go run ./examples/quickstart >/dev/null
echo "all tests passed"
