#!/usr/bin/env bash
# Runs every test of Floe on a fresh machine: installs what the tests need
# (a Python venv with moto, schemathesis, openapi-python-client and lychee;
# the TypeScript client's and the docs' npm packages; mdBook), builds and
# lints the workspace, the Terraform provider and the Lambda zips, builds
# the manual and checks its links, starts moto on 127.0.0.1, then runs the
# whole workspace's tests (unit, handler, conformance on SQLite and
# DynamoDB, black-box, OpenAPI drift, contract).
#
# Two cores do all of it, so what does not depend on each other overlaps
# (issue 54): the downloads and installs, the workspace build, the Lambda
# zips' cross-build and mdBook's build run as background jobs from the
# start, each logging to target/jobs/NAME.log; the script waits for a job
# where a later step needs what it makes. The workspace build has long
# stretches on one core (aws-sdk-ec2 alone is minutes of one rustc), which
# the other jobs fill. At the end it prints the time of each step in the
# foreground, of each job, and the ten slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
script_start=$(date +%s)
jobs_dir=$root/target/jobs
rm -rf "$jobs_dir" target/nextest/default/junit.xml
mkdir -p "$jobs_dir"

# ---------------------------------------------------------------- timing
# Each foreground step's wall time, printed as one table when the script
# ends (also when a step fails), so a slow CI run says where its minutes
# went; beside it each background job's start and length.
phase_names=()
phase_secs=()
phase_name=""
phase_start=0
phase() {
  local now
  now=$(date +%s)
  if [ -n "$phase_name" ]; then
    phase_names+=("$phase_name")
    phase_secs+=($(( now - phase_start )))
  fi
  phase_name=$1
  phase_start=$now
}

declare -A job_pid=()
job_order=()
moto_pid=
# start_job NAME COMMAND...: runs COMMAND in the background, its output in
# target/jobs/NAME.log; its start and end times in NAME.start and NAME.end.
start_job() {
  local name=$1
  shift
  date +%s > "$jobs_dir/$name.start"
  (
    "$@"
    date +%s > "$jobs_dir/$name.end"
  ) > "$jobs_dir/$name.log" 2>&1 &
  job_pid[$name]=$!
  job_order+=("$name")
}
# await_job NAME: waits for the job; when it failed, prints its log and
# fails the run, naming it.
await_job() {
  local name=$1
  if ! wait "${job_pid[$name]}"; then
    echo "!! $name failed; its log ($jobs_dir/$name.log):"
    cat "$jobs_dir/$name.log"
    exit 1
  fi
  # A finished job's output belongs to the run's own log, in order.
  if [ -s "$jobs_dir/$name.log" ]; then
    echo "== $name said:"
    cat "$jobs_dir/$name.log"
  fi
}

kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}

report() {
  phase ""
  local name i start end
  for name in "${job_order[@]}"; do kill_tree "${job_pid[$name]}"; done
  if [ -n "$moto_pid" ]; then kill_tree "$moto_pid"; fi
  echo "== time per step (foreground)"
  for i in "${!phase_names[@]}"; do
    printf '   %-16s %6d s\n' "${phase_names[$i]}" "${phase_secs[$i]}"
  done
  echo "== background jobs (from the script's start)"
  for name in "${job_order[@]}"; do
    start=$(cat "$jobs_dir/$name.start")
    if [ -f "$jobs_dir/$name.end" ]; then
      end=$(cat "$jobs_dir/$name.end")
      printf '   %-16s %6d s, from %5d s to %5d s\n' "$name" $(( end - start )) \
        $(( start - script_start )) $(( end - script_start ))
    else
      printf '   %-16s (did not finish)\n' "$name"
    fi
  done
  printf '   %-16s %6d s\n' "total" $(( $(date +%s) - script_start ))
  if [ -f target/nextest/default/junit.xml ]; then
    python3 scripts/slowest_tests.py target/nextest/default/junit.xml 10 || true
  fi
}
trap report EXIT

# ---------------------------------------------------------------- system
phase system
# The two Debian packages the steps need: shellcheck (the shell scripts'
# tests) and protoc (the Terraform provider's gRPC code is generated at
# build time). Installed first: the provider's build needs protoc.
missing=()
command -v shellcheck >/dev/null || missing+=(shellcheck)
command -v protoc >/dev/null || missing+=(protobuf-compiler)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get install -y "${missing[@]}" || { apt-get update && apt-get install -y "${missing[@]}"; }
fi

# ---------------------------------------------------------------- jobs
venv=${FLOE_VENV:-$root/.venv}
rally_venv=${FLOE_RALLY_VENV:-$root/.venv-rally}
clients=tests/clients/python
ts=tests/contract/typescript
docs_tools=tests/docs
provider_target=${CARGO_TARGET_DIR:-$root/target}

# The test venv: moto, the linters, cargo-lambda and zig, schemathesis, the
# generated client's generator, Terraform as a library, lychee. Installed
# again only when scripts/requirements-test.txt changes. Then the official
# Elasticsearch Python clients, one major each, in folders of their own
# (two versions of one package cannot share the venv):
# tests/tests/official_clients.rs runs each against a deployment of its
# major with it first on PYTHONPATH. Installed again only when a pin changes.
install_venv() {
  local req=scripts/requirements-test.txt major dir
  if [ ! -x "$venv/bin/moto_server" ] || ! cmp -s "$req" "$venv/.requirements"; then
    echo "installing test tools into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$venv/.requirements"
  fi
  for major in 8 9; do
    dir="$venv/es-clients/$major"
    if [ ! -f "$dir/.requirements" ] || ! cmp -s "$clients/requirements-es$major.txt" "$dir/.requirements"; then
      echo "installing the official Elasticsearch Python client $major.x into $dir"
      rm -rf "$dir"
      "$venv/bin/pip" install --quiet --disable-pip-version-check --target "$dir" -r "$clients/requirements-es$major.txt"
      cp "$clients/requirements-es$major.txt" "$dir/.requirements"
    fi
  done
}

# esrally, in a venv of its own: it pins old versions of the Elasticsearch
# client, urllib3, requests and jsonschema, which the test venv must not
# get. tests/tests/rally.rs races a local deployment with it (no Java with
# --pipeline=benchmark-only). Installed again only when a pin changes.
install_rally() {
  local req=tests/rally/requirements.txt
  if [ ! -x "$rally_venv/bin/esrally" ] || ! cmp -s "$req" "$rally_venv/.requirements"; then
    echo "installing esrally into $rally_venv"
    python3 -m venv "$rally_venv"
    "$rally_venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$rally_venv/.requirements"
  fi
}

# An npm folder installed as its lock file pins it; again only when the
# lock changed. The TypeScript client's generator and compiler
# (tests/contract/typescript); the document's linters and the API
# reference page's builder (tests/docs).
install_npm() {
  local dir=$1
  if [ ! -d "$dir/node_modules" ] || ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.package-lock.json.installed"; then
    echo "npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$dir/package-lock.json" "$dir/node_modules/.package-lock.json.installed"
  fi
}

# mdBook builds the manual (scripts/docs.sh). It comes from crates.io, so
# it compiles (two to three minutes of CPU). Installed once per machine
# (cargo's bin folder), again only when the version changes; `search` is
# the only feature the build needs.
mdbook_version=0.5.4
install_mdbook() {
  if [ "$(mdbook --version 2>/dev/null)" != "mdbook v$mdbook_version" ]; then
    echo "cargo install mdbook $mdbook_version"
    env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS -u CARGO_TARGET_DIR \
      cargo install mdbook --version "$mdbook_version" --locked --quiet \
      --no-default-features --features search
  fi
}

# Every target the tests run, in the one feature set they are tested with
# (dev-dependencies unified in): the binaries the black-box tests start and
# the test binaries themselves. Building the binaries alone (`cargo build`)
# resolved features without the dev-dependencies, so the tests then rebuilt
# the crates whose features differ, and linked every binary again.
#
# Clippy lints in the same pass. `cargo clippy` is `cargo check` with
# clippy-driver as the workspace wrapper: a separate run type-checked every
# dependency a second time. Building with that wrapper compiles the
# dependencies once, with plain rustc, and compiles and lints the
# workspace's own crates with clippy-driver; `-D warnings` fails the build
# on any lint, as `cargo clippy -- -D warnings` does (cargo's timings of
# it: target/cargo-timings/cargo-timing.html). The tests run with the
# same wrapper, so they reuse these builds instead of compiling again.
clippy_driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
# CI builds a fresh clone once: incremental compilation's caches would be
# written and never read, and its smaller units cost time of their own.
# A developer's runs keep it (cargo's default), so an edit rebuilds fast.
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL=0
fi
with_clippy() {
  RUSTC_WORKSPACE_WRAPPER="$clippy_driver" \
    CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" "$@"
}
build_workspace() {
  with_clippy cargo build --workspace --all-targets --quiet --timings
  # The Terraform provider, a workspace of its own (its Cargo.toml says
  # why), built into the same target folder, where tests/tests/terraform.rs
  # finds it; after the workspace, whose lock on that folder it would wait
  # for anyway.
  CARGO_TARGET_DIR="$provider_target" with_clippy \
    cargo build --manifest-path terraform/provider/Cargo.toml --all-targets --quiet
}

# The functions as Lambda runs them: `bootstrap` in a zip per function,
# where infra/template.yaml's CodeUri points (target/lambda/<binary>/),
# held to the template by scripts/check_lambda_zips.py. Packaged from this
# build's binaries, the ones the tests run (the worker's also carries the
# simulated compute the emulator tests use; the template's FLOE_COMPUTE
# never selects it), for this machine's architecture. Deploys build arm64
# release zips with `cargo lambda build --release --arm64`
# (docs/deploying.md). That cross-build compiles every dependency a second
# time (eight to nine minutes here, a build of the functions alone for
# this machine six: their features are not the tests'), so the test
# command makes it only when asked: FLOE_LAMBDA_ARM64=1 builds the arm64
# zips with cargo lambda instead, as the test command did before issue 54.
lambda_zips() {
  local target=aarch64-unknown-linux-gnu
  rm -rf target/lambda
  if [ "${FLOE_LAMBDA_ARM64:-}" = 1 ]; then
    timeout 300 rustup target add "$target"
    cargo lambda build --quiet --profile lambda-ci --arm64 --output-format zip \
      --lambda-dir target/lambda -p floe-api-function -p floe-worker-function -p floe-snapshotter-function
    python3 scripts/check_lambda_zips.py infra/template.yaml aarch64
    return
  fi
  python3 scripts/package_lambda_zips.py target/debug target/lambda floe-api floe-worker floe-snapshotter
  python3 scripts/check_lambda_zips.py infra/template.yaml "$(uname -m)"
}

start_job venv install_venv
start_job rally install_rally
start_job npm-client install_npm "$ts"
start_job npm-docs install_npm "$docs_tools"
start_job mdbook install_mdbook
start_job build build_workspace

# ---------------------------------------------------------------- lint
phase lint
echo "== cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path terraform/provider/Cargo.toml -- --check

await_job venv
export PATH="$venv/bin:$PATH"
echo "== cfn-lint infra/template.yaml"
cfn-lint infra/template.yaml

# The contract as linters read it: Redocly's recommended rules and
# Spectral's oas rules, 0 errors and 0 warnings (each config file in
# openapi/ says which rules).
await_job npm-docs
export REDOCLY_TELEMETRY=off
echo "== redocly lint, spectral lint (openapi/openapi.json)"
(cd openapi && "$root/$docs_tools/node_modules/.bin/redocly" lint --config redocly.yaml --format stylish openapi.json)
(cd openapi && "$root/$docs_tools/node_modules/.bin/spectral" lint openapi.json --ruleset .spectral.yaml --fail-severity=warn)

# The manual: built with mdBook, the API reference page rendered from
# openapi/openapi.json, every link checked (scripts/docs.sh).
phase docs
await_job mdbook
./scripts/docs.sh

# ---------------------------------------------------------------- build
phase "build (wait)"
echo "== cargo build --all-targets, linted by clippy (warnings are errors), and the Terraform provider"
await_job build
phase "lambda zips"
echo "== the functions' bootstrap zips"
lambda_zips
await_job rally
await_job npm-client

# ---------------------------------------------------------------- tests
# Where the tests find the tools they drive: they fail, not skip, without
# them.
export FLOE_TEST_ES_CLIENTS="$venv/es-clients"
export FLOE_TEST_PYTHON="$venv/bin/python"
export FLOE_TEST_ESRALLY="$rally_venv/bin/esrally"
export FLOE_TEST_SCHEMATHESIS="$venv/bin/st"
export FLOE_TEST_OPENAPI_PYTHON_CLIENT="$venv/bin/openapi-python-client"
export FLOE_TEST_TYPESCRIPT_CLIENT="$root/$ts"

phase tests
# The run's shared moto, for the suites light enough to share it; the heavy
# ones start servers of their own (tests/src/moto_server.rs says why).
echo "== starting moto on 127.0.0.1"
"$venv/bin/python" scripts/moto_serial.py 127.0.0.1 0 > target/moto.port 2> target/moto.log &
moto_pid=$!
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' target/moto.port)
  if [ -n "$port" ]; then break; fi
  if ! kill -0 $moto_pid 2>/dev/null; then cat target/moto.log; echo "moto did not start"; exit 1; fi
  sleep 0.2
done
if [ -z "$port" ]; then cat target/moto.log; echo "moto did not start within 60 s"; exit 1; fi
echo "   moto on 127.0.0.1:$port"

# Everything AWS-shaped in the tests talks to moto on loopback, with fake
# credentials, and never asks an instance metadata service.
export FLOE_TEST_AWS_ENDPOINT="http://127.0.0.1:$port"
export AWS_ENDPOINT_URL="$FLOE_TEST_AWS_ENDPOINT"
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true

echo "== tests"
CARGO_TARGET_DIR="$provider_target" with_clippy \
  cargo test --manifest-path terraform/provider/Cargo.toml --quiet
if cargo nextest --version >/dev/null 2>&1; then
  with_clippy cargo nextest run --workspace --no-fail-fast "$@"
else
  with_clippy cargo test --workspace --no-fail-fast "$@"
fi
