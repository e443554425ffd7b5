#!/usr/bin/env bash
# Every benchmark in one run, printed as one table: each figure next to its
# baseline measured in the same run, their ratio and the target (issue 16).
# Benchmarks print figures; none asserts a time, and nothing here is a test.
#
# Usage: scripts/bench.sh [PROFILE]   (default release, as deployed)
#
# PROFILE builds the measured binaries and their baselines in one cargo run;
# the benchmark runners themselves are built in the dev profile (they only
# measure). Moto is started on a free loopback port; every server the
# benchmarks start listens on 127.0.0.1. Needs the venv that scripts/test.sh
# installs (moto). The whole output of each benchmark is kept in
# $CARGO_TARGET_DIR/bench/.
#
# A benchmark reports a figure by printing one line
#   BENCH<TAB>figure<TAB>value<TAB>baseline<TAB>ratio<TAB>target
# which this script gathers into the table at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
profile=${1:-release}
venv=${FLOE_VENV:-$root/.venv}
target_dir=${CARGO_TARGET_DIR:-$root/target}
bin_dir=$target_dir/$profile
[ "$profile" = dev ] && bin_dir=$target_dir/debug
out=$target_dir/bench
mkdir -p "$out"
rows=$out/rows.tsv
: > "$rows"

# The bench runners (dev profile), each named by its bench target.
benches=(create_plan clone cold_start)

echo "== building the measured binaries ($profile) and the bench runners (dev)"
# Every binary of the workspace (floe-local, the functions, the baselines)
# in one cargo run, so they share one feature resolution and one profile.
# FLOE_BENCH_BIN_DIR measures binaries built before instead (all of them
# with PROFILE, from the same commit).
if [ -n "${FLOE_BENCH_BIN_DIR:-}" ]; then
  bin_dir=$FLOE_BENCH_BIN_DIR
else
  cargo build --quiet --profile "$profile" --workspace --bins
fi
bench_args=()
for b in "${benches[@]}"; do bench_args+=(--bench "$b"); done
cargo bench --quiet --profile dev --workspace "${bench_args[@]}" --no-run

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

moto_port=$(free_port)
"$venv/bin/python" scripts/moto_serial.py 127.0.0.1 "$moto_port" > "$out/moto.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  if curl -s -o /dev/null "http://127.0.0.1:$moto_port/moto-api/"; then break; fi
  sleep 0.2
done
export FLOE_TEST_AWS_ENDPOINT="http://127.0.0.1:$moto_port"

# Runs one bench runner, keeping its output and its BENCH rows.
run_bench() {
  local name=$1
  shift
  echo "== $name"
  if ! "$@" cargo bench --quiet --profile dev --workspace --bench "$name" > "$out/$name.log" 2>&1; then
    echo "$name failed; its output is in $out/$name.log" >&2
    printf '%s\tFAILED (see %s)\t-\t-\t-\n' "$name" "$out/$name.log" >> "$rows"
    return 0
  fi
  grep -v '^BENCH	' "$out/$name.log" || true
  grep '^BENCH	' "$out/$name.log" | cut -f2- >> "$rows" || true
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
row() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(ratio "$2" "$3")" "$4" >> "$rows"; }

run_bench create_plan env
run_bench clone env
run_bench cold_start env FLOE_COLD_START_DIR="$bin_dir" FLOE_COLD_START_RUNS="${FLOE_COLD_START_RUNS:-10}"

echo
echo "== figures ($profile build; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); $(git rev-parse --short HEAD))"
{
  printf 'figure\tvalue\tbaseline\tratio\ttarget\n'
  cat "$rows"
} | column -t -s $'\t'
