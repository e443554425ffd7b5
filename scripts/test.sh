#!/usr/bin/env bash
# Runs every test of Floe on a fresh machine: installs what the tests need
# (a Python venv with moto, schemathesis, openapi-python-client and lychee;
# the TypeScript client's and the docs' npm packages; mdBook), starts moto
# on 127.0.0.1, then runs formatting, lints, the manual's build and link
# check, and the whole workspace's tests (unit, handler, conformance on
# SQLite and DynamoDB, black-box, OpenAPI drift, contract).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# Each phase's wall time, printed as one table when the script ends (also
# when a phase fails), so a slow CI run says where its minutes went.
phase_names=()
phase_secs=()
phase_name=""
phase_start=0
script_start=$(date +%s)
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
phase_table() {
  phase ""
  echo "== time per phase"
  local i
  for i in "${!phase_names[@]}"; do
    printf '   %-12s %6d s\n' "${phase_names[$i]}" "${phase_secs[$i]}"
  done
  printf '   %-12s %6d s\n' "total" $(( $(date +%s) - script_start ))
}

phase install

# mdBook builds the manual (scripts/docs.sh). It comes from crates.io, so
# it compiles (two to three minutes on two cores): started first, in the
# background, to overlap the downloads below, and awaited before the docs
# phase. Installed once per machine (cargo's bin folder), again only when
# the version changes; `search` is the only feature the build needs.
mdbook_version=0.5.4
mkdir -p target
mdbook_pid=""
if [ "$(mdbook --version 2>/dev/null)" != "mdbook v$mdbook_version" ]; then
  echo "== installing mdbook $mdbook_version (cargo install, in the background)"
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS -u CARGO_TARGET_DIR \
    cargo install mdbook --version "$mdbook_version" --locked --quiet \
    --no-default-features --features search > target/mdbook-install.log 2>&1 &
  mdbook_pid=$!
fi

if ! command -v shellcheck >/dev/null; then
  apt-get install -y shellcheck || { apt-get update && apt-get install -y shellcheck; }
fi
# The Terraform provider's gRPC code is generated at build time by protoc.
if ! command -v protoc >/dev/null; then
  apt-get install -y protobuf-compiler || { apt-get update && apt-get install -y protobuf-compiler; }
fi
venv=${FLOE_VENV:-$root/.venv}
req=scripts/requirements-test.txt
if [ ! -x "$venv/bin/moto_server" ] || ! cmp -s "$req" "$venv/.requirements"; then
  echo "== installing test tools into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/.requirements"
fi

# The official Elasticsearch Python clients, one major each, in folders of
# their own (two versions of one package cannot share the venv):
# tests/tests/official_clients.rs runs each against a deployment of its
# major with it first on PYTHONPATH. Installed again only when a pin changes.
clients=tests/clients/python
for major in 8 9; do
  dir="$venv/es-clients/$major"
  if [ ! -f "$dir/.requirements" ] || ! cmp -s "$clients/requirements-es$major.txt" "$dir/.requirements"; then
    echo "== installing the official Elasticsearch Python client $major.x into $dir"
    rm -rf "$dir"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --target "$dir" -r "$clients/requirements-es$major.txt"
    cp "$clients/requirements-es$major.txt" "$dir/.requirements"
  fi
done
export FLOE_TEST_ES_CLIENTS="$venv/es-clients"
export FLOE_TEST_PYTHON="$venv/bin/python"

# esrally, in a venv of its own: it pins old versions of the Elasticsearch
# client, urllib3, requests and jsonschema, which the test venv must not
# get. tests/tests/rally.rs races a local deployment with it (no Java with
# --pipeline=benchmark-only). Installed again only when a pin changes.
rally_venv=${FLOE_RALLY_VENV:-$root/.venv-rally}
rally_req=tests/rally/requirements.txt
if [ ! -x "$rally_venv/bin/esrally" ] || ! cmp -s "$rally_req" "$rally_venv/.requirements"; then
  echo "== installing esrally into $rally_venv"
  python3 -m venv "$rally_venv"
  "$rally_venv/bin/pip" install --quiet --disable-pip-version-check -r "$rally_req"
  cp "$rally_req" "$rally_venv/.requirements"
fi
export FLOE_TEST_ESRALLY="$rally_venv/bin/esrally"

# The TypeScript client's generator and compiler (tests/contract/typescript),
# installed as its lock file pins them; again only when the lock changed.
ts=tests/contract/typescript
if [ ! -d "$ts/node_modules" ] || ! cmp -s "$ts/package-lock.json" "$ts/node_modules/.package-lock.json.installed"; then
  echo "== installing the TypeScript client's tools (npm ci)"
  (cd "$ts" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$ts/package-lock.json" "$ts/node_modules/.package-lock.json.installed"
fi
# Where tests/tests/contract.rs finds the contract tools: it fails, not
# skips, without them.
export FLOE_TEST_SCHEMATHESIS="$venv/bin/st"
export FLOE_TEST_OPENAPI_PYTHON_CLIENT="$venv/bin/openapi-python-client"
export FLOE_TEST_TYPESCRIPT_CLIENT="$root/$ts"

# The document's linters and the API reference page's builder
# (tests/docs), installed as their lock file pins them.
docs_tools=tests/docs
if [ ! -d "$docs_tools/node_modules" ] || ! cmp -s "$docs_tools/package-lock.json" "$docs_tools/node_modules/.package-lock.json.installed"; then
  echo "== installing the document's linters (npm ci)"
  (cd "$docs_tools" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$docs_tools/package-lock.json" "$docs_tools/node_modules/.package-lock.json.installed"
fi
export REDOCLY_TELEMETRY=off

mkdir -p target
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
echo "== starting moto on 127.0.0.1:$port"
"$venv/bin/python" scripts/moto_serial.py 127.0.0.1 "$port" > target/moto.log 2>&1 &
moto_pid=$!
trap 'kill $moto_pid 2>/dev/null || true; phase_table' EXIT
for _ in $(seq 1 100); do
  if curl -s -o /dev/null "http://127.0.0.1:$port/moto-api/"; then break; fi
  if ! kill -0 $moto_pid 2>/dev/null; then cat target/moto.log; echo "moto did not start"; exit 1; fi
  sleep 0.2
done

# Everything AWS-shaped in the tests talks to moto on loopback, with fake
# credentials, and never asks an instance metadata service.
export FLOE_TEST_AWS_ENDPOINT="http://127.0.0.1:$port"
export AWS_ENDPOINT_URL="$FLOE_TEST_AWS_ENDPOINT"
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true
export PATH="$venv/bin:$PATH"

phase lint
echo "== cfn-lint infra/template.yaml"
cfn-lint infra/template.yaml

# The contract as linters read it: Redocly's recommended rules and
# Spectral's oas rules, 0 errors and 0 warnings (each config file in
# openapi/ says which rules).
echo "== redocly lint, spectral lint (openapi/openapi.json)"
(cd openapi && "$root/$docs_tools/node_modules/.bin/redocly" lint --config redocly.yaml --format stylish openapi.json)
(cd openapi && "$root/$docs_tools/node_modules/.bin/spectral" lint openapi.json --ruleset .spectral.yaml --fail-severity=warn)

echo "== cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path terraform/provider/Cargo.toml -- --check

phase "build+clippy"
# Every target the tests run, in the one feature set they are tested with
# (dev-dependencies unified in): the binaries the black-box tests start and
# the test binaries themselves. Building the binaries alone (`cargo build`)
# resolved features without the dev-dependencies, so the tests phase then
# rebuilt the crates whose features differ, and linked every binary again.
#
# Clippy lints in the same pass. `cargo clippy` is `cargo check` with
# clippy-driver as the workspace wrapper: a separate run type-checked every
# dependency a second time (the AWS SDKs in check mode: most of its four to
# five minutes). Building with that wrapper compiles the dependencies once,
# with plain rustc, and compiles and lints the workspace's own crates with
# clippy-driver; `-D warnings` fails the build on any lint, as
# `cargo clippy -- -D warnings` does. The tests phase runs with the same
# wrapper, so it reuses these builds instead of compiling the crates again.
echo "== cargo build --all-targets, linted by clippy (warnings are errors)"
clippy_driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
cargo build --workspace --all-targets --quiet
# The Terraform provider, a workspace of its own (its Cargo.toml says why),
# built into the same target folder, where tests/tests/terraform.rs finds it.
provider_target=${CARGO_TARGET_DIR:-$root/target}
echo "== cargo build the Terraform provider, linted by clippy"
CARGO_TARGET_DIR="$provider_target" cargo build --manifest-path terraform/provider/Cargo.toml --all-targets --quiet

# The functions as Lambda runs them: `bootstrap` in a zip per function, where
# infra/template.yaml's CodeUri points. Built with the lambda-ci profile
# (Cargo.toml says why); the deploy guide's `--release` differs only in
# optimisation. Lambda runs arm64 (Graviton); cross-building needs rustup's
# aarch64 standard library, which a machine without a download of it cannot
# have: then the zips are built for this host's architecture instead, loudly.
phase "lambda zips"
echo "== cargo lambda build (the functions' bootstrap zips)"
lambda_target=aarch64-unknown-linux-gnu
if ! rustup target list --installed 2>/dev/null | grep -qx "$lambda_target"; then
  timeout 300 rustup target add "$lambda_target" || true
fi
if rustup target list --installed 2>/dev/null | grep -qx "$lambda_target"; then
  lambda_arch=aarch64
  lambda_flag=--arm64
else
  lambda_arch=$(uname -m)
  lambda_flag=--x86-64
  echo "!! rustup target $lambda_target is not installable here: building the zips for $lambda_arch;"
  echo "!! they prove the packaging, but infra/template.yaml deploys arm64 zips"
fi
rm -rf target/lambda
# Linted above; the arm64 build needs no second lint.
env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo lambda build --quiet --profile lambda-ci "$lambda_flag" --output-format zip \
  --lambda-dir target/lambda -p floe-api-function -p floe-worker-function -p floe-snapshotter-function
"$venv/bin/python" scripts/check_lambda_zips.py infra/template.yaml "$lambda_arch"

# The manual: built with mdBook, the API reference page rendered from
# openapi/openapi.json, every link checked (scripts/docs.sh).
phase docs
if [ -n "$mdbook_pid" ] && ! wait "$mdbook_pid"; then
  cat target/mdbook-install.log
  echo "cargo install mdbook failed"
  exit 1
fi
./scripts/docs.sh

phase tests
echo "== tests"
CARGO_TARGET_DIR="$provider_target" cargo test --manifest-path terraform/provider/Cargo.toml --quiet
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
