#!/usr/bin/env bash
# Cold-start figures (not a test): builds the functions and the two
# baselines (the lambda_http hello function, and one DynamoDB Query behind
# lambda_http) with one profile in one cargo run (default `release`, as
# deployed), starts moto on 127.0.0.1, and runs tests/benches/cold_start.rs,
# which starts each binary FLOE_COLD_START_RUNS times (default 20) under the
# Lambda runtime emulator. Usage: scripts/cold-start.sh [PROFILE] [NAME...]
# Needs the venv that scripts/test.sh installs (moto).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
profile=${1:-release}
shift || true
venv=${FLOE_VENV:-$root/.venv}
target_dir=${CARGO_TARGET_DIR:-$root/target}

echo "== building the functions and the baselines ($profile)"
cargo build --quiet --profile "$profile" \
  -p floe-api-function -p floe-worker-function -p floe-snapshotter-function -p floe-hello-lambda \
  -p floe-dynamo-baseline
bin_dir=$target_dir/$profile
[ "$profile" = dev ] && bin_dir=$target_dir/debug

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
mkdir -p target
"$venv/bin/python" scripts/moto_serial.py 127.0.0.1 "$port" > target/moto-cold-start.log 2>&1 &
moto_pid=$!
trap 'kill $moto_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  if curl -s -o /dev/null "http://127.0.0.1:$port/moto-api/"; then break; fi
  sleep 0.2
done

# The runner itself is built in the dev profile: it only measures.
FLOE_COLD_START_DIR=$bin_dir FLOE_TEST_AWS_ENDPOINT="http://127.0.0.1:$port" \
  cargo bench --quiet --profile dev --workspace --bench cold_start -- "$@"
