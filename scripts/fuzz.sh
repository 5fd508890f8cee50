#!/usr/bin/env bash
# Runs the libFuzzer targets built under build/fuzz (make fuzz-build), two at a time.
# Usage: scripts/fuzz.sh SECONDS [target...]
# For each target: replays every input kept in tests/fuzz/regressions/<target>/ (each must
# pass), then fuzzes for SECONDS from the seeds in tests/fuzz/corpus/<target>/ (new inputs go to
# build/fuzz/corpus/<target>/, so the committed seeds stay as they are). A crash, leak, hang
# (10 s on one input) or broken property fails the run; its input is saved as
# build/fuzz/artifacts/<target>-crash-... . Prints executions per second and coverage.
# SECONDS=0 only replays, with the replay builds (make fuzz-replay-build: tests/fuzz/replay.c
# instead of libFuzzer): the regressions and every committed seed run once (`make fuzz-short`,
# in `make test`); a failure names its input.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: scripts/fuzz.sh SECONDS [target...]}
shift

max_len() {
  case $1 in
    fuzz_dates) echo 64 ;;
    fuzz_router) echo 1024 ;;
    fuzz_jwt) echo 2048 ;;
    fuzz_multipart) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

replay_one() {
  local t=$1 bin=build/fuzz-replay/$1 log=build/fuzz-replay/$1.log inputs=()
  # the regressions one by one (each run whole), then the seeds' folder (each cut to max_len)
  for f in tests/fuzz/regressions/"$t"/*; do [ -f "$f" ] && inputs+=("$f"); done
  [ -d "tests/fuzz/corpus/$t" ] && inputs+=("tests/fuzz/corpus/$t")
  if ! "$bin" -max_len="$(max_len "$t")" "${inputs[@]}" >"$log" 2>&1; then
    echo "FAIL $t:"; tail -60 "$log"; return 1
  fi
  printf 'ok   %-16s %s\n' "$t" "$(tail -1 "$log")"
}

run_one() {
  local t=$1 seconds=$2 bin=build/fuzz/$1 log=build/fuzz/$1.log
  if [ "$seconds" = 0 ]; then replay_one "$t"; return; fi
  mkdir -p "build/fuzz/corpus/$t" build/fuzz/artifacts
  local opts=(-timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")" -print_final_stats=1
              -artifact_prefix="build/fuzz/artifacts/$t-")
  [ -f "tests/fuzz/$t.dict" ] && opts+=(-dict="tests/fuzz/$t.dict")
  local regressions=(tests/fuzz/regressions/"$t"/*)
  if [ -e "${regressions[0]}" ]; then
    if ! "$bin" "${opts[@]}" "${regressions[@]}" >"$log" 2>&1; then
      echo "FAIL $t: a regression input fails again"; tail -40 "$log"; return 1
    fi
  fi
  if ! "$bin" "${opts[@]}" -max_total_time="$seconds" "build/fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    echo "FAIL $t (input in build/fuzz/artifacts/):"; tail -60 "$log"; return 1
  fi
  local execs cov ft
  execs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  printf 'ok   %-16s %8s exec/s  cov %6s  ft %6s  corpus %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" \
    "$(ls "build/fuzz/corpus/$t" | wc -l)"
}
export -f run_one replay_one max_len

targets=("$@")
built=build/fuzz
[ "$seconds" = 0 ] && built=build/fuzz-replay
if [ ${#targets[@]} -eq 0 ]; then
  for b in "$built"/fuzz_*; do [ -x "$b" ] && targets+=("$(basename "$b")"); done
fi
[ ${#targets[@]} -gt 0 ] || { echo "no fuzz targets built in $built (make fuzz-build or fuzz-replay-build)"; exit 1; }
printf '%s\n' "${targets[@]}" | xargs -P2 -I{} bash -c 'run_one "$1" "$2"' _ {} "$seconds"
