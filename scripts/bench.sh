#!/usr/bin/env bash
# Every benchmark in one run, printed as one table: each figure next to its
# baseline measured in the same run, their ratio and the target (issue 16).
# Benchmarks print figures; none asserts a time, and nothing here is a test.
#
# Usage: scripts/bench.sh [PROFILE]   (default release, as deployed)
#        FLOE_BENCH_ONLY=warm scripts/bench.sh [PROFILE]
#                                     (the warm-throughput and local-mode
#                                     memory figures alone: no bench runner,
#                                     no moto)
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
only=${FLOE_BENCH_ONLY:-}
case "$only" in
  "" | warm) ;;
  *)
    echo "FLOE_BENCH_ONLY must be empty or warm, not $only" >&2
    exit 2
    ;;
esac
venv=${FLOE_VENV:-$root/.venv}
target_dir=${CARGO_TARGET_DIR:-$root/target}
bin_dir=$target_dir/$profile
[ "$profile" = dev ] && bin_dir=$target_dir/debug
out=$target_dir/bench
mkdir -p "$out"
rows=$out/rows.tsv
: > "$rows"

# The bench runners (dev profile), each named by its bench target.
benches=(create_plan clone cold_start dynamo_calls list_scale fleet_health)

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
if [ -z "$only" ]; then
  bench_args=()
  for b in "${benches[@]}"; do bench_args+=(--bench "$b"); done
  cargo bench --quiet --profile dev --workspace "${bench_args[@]}" --no-run
fi

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

if [ -z "$only" ]; then
  moto_port=$(free_port)
  "$venv/bin/python" scripts/moto_serial.py 127.0.0.1 "$moto_port" > "$out/moto.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    if curl -s -o /dev/null "http://127.0.0.1:$moto_port/moto-api/"; then break; fi
    sleep 0.2
  done
  export FLOE_TEST_AWS_ENDPOINT="http://127.0.0.1:$moto_port"
fi

# Runs one bench runner, keeping its output and its BENCH rows. The runner
# is built in the dev profile unless BENCH_PROFILE says otherwise.
run_bench() {
  local name=$1
  shift
  echo "== $name"
  if ! "$@" cargo bench --quiet --profile "${BENCH_PROFILE:-dev}" --workspace --bench "$name" > "$out/$name.log" 2>&1; then
    echo "$name failed; its output is in $out/$name.log" >&2
    printf '%s\tFAILED (see %s)\t-\t-\t-\n' "$name" "$out/$name.log" >> "$rows"
    return 0
  fi
  grep -v '^BENCH	' "$out/$name.log" || true
  grep '^BENCH	' "$out/$name.log" | cut -f2- >> "$rows" || true
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
row() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(ratio "$2" "$3")" "$4" >> "$rows"; }

# ---- warm throughput and local-mode memory: floe-local next to axum-baseline
if ! command -v wrk > /dev/null; then
  echo "== installing wrk (Debian)"
  apt-get install -y wrk > "$out/wrk-install.log" 2>&1 || {
    echo "cannot install wrk: see $out/wrk-install.log" >&2
    exit 1
  }
fi
# Both servers get exactly these settings, in interleaved rounds.
read -r -a wrk_opts <<< "${FLOE_BENCH_WRK:--t2 -c8 -d5s}"

server_pid=""
server_addr=""
# Starts a server in the background and reads the address from its first
# line ("... listening on http://ADDR").
start_server() {
  local log=$1
  shift
  "$@" > "$log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  server_addr=""
  for _ in $(seq 1 300); do
    server_addr=$(sed -n 's|.*listening on http://\([0-9.:]*\).*|\1|p' "$log" | head -1)
    [ -n "$server_addr" ] && return 0
    kill -0 "$server_pid" 2> /dev/null || break
    sleep 0.1
  done
  echo "cannot start $*: see $log" >&2
  exit 1
}

peak_rss_mb() { awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

# From wrk's output: requests per second, p50 and p99 in ms, non-2xx answers.
wrk_figures() {
  awk '
    function ms(v) {
      if (v ~ /us$/) return substr(v, 1, length(v) - 2) / 1000
      if (v ~ /ms$/) return substr(v, 1, length(v) - 2) + 0
      if (v ~ /s$/) return substr(v, 1, length(v) - 1) * 1000
      return v + 0
    }
    /Requests\/sec:/ { rps = $2 }
    $1 == "50%" { p50 = ms($2) }
    $1 == "99%" { p99 = ms($2) }
    /Non-2xx or 3xx responses:/ { bad = $NF }
    END { printf "%.0f %.3f %.3f %d\n", rps, p50, p99, bad }' "$1"
}

create_body='{"name":"bench","version":"8.15.3","node_groups":[{"id":"hot","roles":["master","data_hot","data_content","ingest"],"instance_type":"m6g.xlarge","count":1,"zone_count":1,"storage":{"size_gb":20}}]}'

echo "== warm throughput: floe-local and axum-baseline ($profile), wrk ${wrk_opts[*]}; load $(cut -d' ' -f1-3 /proc/loadavg)"
floe_data=$(mktemp -d)
# Plans start but their nodes never finish booting, so the in-process
# worker stays idle while wrk runs (its work is not the API's).
floe_env=(env FLOE_DATA_DIR="$floe_data" FLOE_LISTEN=127.0.0.1:0 FLOE_LOCAL_S3=off
  FLOE_SIM_BOOT_DELAY_MS=86400000 FLOE_PLAN_POLL_MS=86400000)
start_server "$out/floe-local.log" "${floe_env[@]}" "$bin_dir/floe-local" serve
floe_pid=$server_pid
floe_addr=$server_addr
token=$("${floe_env[@]}" "$bin_dir/floe-local" token --org bench --role platform_admin)
auth="Authorization: Bearer $token"

# 100 deployments, so that a page of 100 is full.
for i in $(seq 1 100); do
  curl -sf -X POST "http://$floe_addr/api/v1/deployments" -H "$auth" \
    -H 'Content-Type: application/json' -H "Idempotency-Key: seed-$i" \
    -d "$create_body" > "$out/seed.json"
done
dep_id=$(jq -r .id "$out/seed.json")
# Floe's own answers, which the baseline's same-body routes serialise from
# memory: the bare route for an answer of that size and shape.
curl -sf "http://$floe_addr/api/v1/deployments/$dep_id" -H "$auth" > "$out/one-body.json"
curl -sf "http://$floe_addr/api/v1/deployments?size=100" -H "$auth" > "$out/list-body.json"
[ "$(jq '.deployments | length' "$out/list-body.json")" = 100 ] || {
  echo "the seeded list page does not hold 100 deployments: see $out/list-body.json" >&2
  exit 1
}

start_server "$out/axum-baseline.log" env FLOE_LISTEN=127.0.0.1:0 \
  FLOE_BASELINE_ONE_BODY="$out/one-body.json" FLOE_BASELINE_LIST_BODY="$out/list-body.json" \
  "$bin_dir/axum-baseline"
base_pid=$server_pid
base_addr=$server_addr

# Load of 1 first (one connection, one request at a time), so that each
# server's peak RSS is that load's, not the throughput runs'.
for addr in "$floe_addr" "$base_addr"; do
  wrk -t1 -c1 -d3s -H "$auth" "http://$addr/api/v1/deployments/$dep_id" > "$out/load1.log"
  wrk -t1 -c1 -d3s -H "$auth" "http://$addr/api/v1/deployments?size=100" >> "$out/load1.log"
  BODY=$create_body wrk -t1 -c1 -d3s -H "$auth" -s scripts/bench/create.lua \
    "http://$addr/api/v1/deployments" -- "load1-$RANDOM" >> "$out/load1.log"
done
row "peak RSS floe-local, local mode, load 1, MB (baseline axum-baseline)" \
  "$(peak_rss_mb "$floe_pid")" "$(peak_rss_mb "$base_pid")" "-"

# One wrk run with the shared settings; prints rps, p50, p99, non-2xx.
run_wrk() {
  local log=$1 url=$2 post=$3
  if [ "$post" = post ]; then
    BODY=$create_body wrk "${wrk_opts[@]}" --latency -H "$auth" -s scripts/bench/create.lua \
      "$url" -- "run-$RANDOM$RANDOM" > "$log"
  else
    wrk "${wrk_opts[@]}" --latency -H "$auth" "$url" > "$log"
  fi
  wrk_figures "$log"
}

# The median of column COL (1-based) of the figures file FILE.
median_col() {
  cut -d' ' -f"$2" "$1" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# Of a file of run_wrk lines, one per round: the medians of rps, p50 and
# p99, and the non-2xx answers of all rounds.
medians() {
  echo "$(median_col "$1" 1) $(median_col "$1" 2) $(median_col "$1" 3) $(awk '{ n += $4 } END { print n + 0 }' "$1")"
}

# One endpoint: floe-local and each of its baselines, same settings, in
# interleaved rounds (floe-local, then each baseline, then again), and the
# median of each: this machine's speed drifts by a tenth or more from one
# minute to the next, and a server measured a minute after the other would
# carry that drift into the ratio.
# Arguments: label, Floe's path, get|post, then one or more baselines as
# NAME=PATH on axum-baseline; the first one is what the targets are judged
# against, the others are printed beside it without a target.
rounds=${FLOE_BENCH_ROUNDS:-5}
measure_endpoint() {
  local label=$1 path=$2 post=$3
  shift 3
  local slug=${label//[^a-z]/_}
  local names=(floe) urls=("http://$floe_addr$path") spec round i
  for spec in "$@"; do
    names+=("${spec%%=*}")
    urls+=("http://$base_addr${spec#*=}")
  done
  for i in "${!names[@]}"; do : > "$out/figures-$slug-${names[$i]}"; done
  for round in $(seq 1 "$rounds"); do
    for i in "${!names[@]}"; do
      run_wrk "$out/wrk-$slug-${names[$i]}-$round.log" "${urls[$i]}" "$post" \
        >> "$out/figures-$slug-${names[$i]}"
    done
  done
  local f_rps f_p50 f_p99 f_bad
  read -r f_rps f_p50 f_p99 f_bad <<< "$(medians "$out/figures-$slug-floe")"
  local note=""
  [ "$f_bad" != 0 ] && note=" ($f_bad non-2xx)"
  local first=yes name b_rps b_p50 b_p99 b_bad rps_target p99_target suffix
  for i in $(seq 1 $(( ${#names[@]} - 1 ))); do
    name=${names[$i]}
    read -r b_rps b_p50 b_p99 b_bad <<< "$(medians "$out/figures-$slug-$name")"
    echo "$label (median of $rounds rounds): floe-local $f_rps rps p50 $f_p50 ms p99 $f_p99 ms$note; axum-baseline ($name, ${urls[$i]#http://"$base_addr"}) $b_rps rps p50 $b_p50 ms p99 $b_p99 ms ($b_bad non-2xx)"
    rps_target="-"
    p99_target="-"
    if [ "$post" != post ] && [ "$first" = yes ]; then
      rps_target=">= 0.5x"
      p99_target="<= 2x"
    fi
    suffix=""
    [ $# -gt 1 ] && suffix=" [baseline: $name]"
    row "warm $label: requests/s$note$suffix" "$f_rps" "$b_rps" "$rps_target"
    row "warm $label: p50 ms$suffix" "$f_p50" "$b_p50" "-"
    row "warm $label: p99 ms$suffix" "$f_p99" "$b_p99" "$p99_target"
    first=no
  done
}
# A read of one deployment is judged against the bare route's small body,
# and shown beside a route that serialises Floe's own answer too.
measure_endpoint "GET /deployments/{id}" "/api/v1/deployments/$dep_id" get \
  "bare=/api/v1/deployments/$dep_id" "same-body=/baseline/deployments/$dep_id"
# A page of 100 is judged against a route answering the same 100 records
# (serialised from memory per request): the bare route for that answer.
# The empty page is shown beside it: it measures only what HTTP costs.
measure_endpoint "GET /deployments?size=100" "/api/v1/deployments?size=100" get \
  "same-body=/baseline/deployments?size=100" "empty-list=/api/v1/deployments?size=100"
measure_endpoint "POST /deployments" "/api/v1/deployments" post "bare=/api/v1/deployments"
kill "$floe_pid" "$base_pid" 2> /dev/null || true
rm -rf "$floe_data"

if [ -z "$only" ]; then
  run_bench create_plan env
  run_bench clone env
  run_bench cold_start env FLOE_COLD_START_DIR="$bin_dir" FLOE_COLD_START_RUNS="${FLOE_COLD_START_RUNS:-10}"
  run_bench dynamo_calls env
  run_bench list_scale env
  run_bench fleet_health env
  # Search in local mode next to tantivy used directly
  # (tests/benches/search.rs): the runner measures the library itself and
  # starts floe-local from its own profile's folder, so it is built with
  # PROFILE. FLOE_BENCH_SEARCH_DOCS (default 1,000,000) sets the size.
  BENCH_PROFILE=$profile run_bench search env
fi

echo
echo "== figures ($profile build; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); $(git rev-parse --short HEAD))"
{
  printf 'figure\tvalue\tbaseline\tratio\ttarget\n'
  cat "$rows"
} | column -t -s $'\t'
