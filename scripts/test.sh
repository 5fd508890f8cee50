#!/usr/bin/env bash
# `make test`: everything CI runs, in the order that keeps 2 cores busy.
#  0. the tree's shape (scripts/check_shape.py: no include cycle between domains, SQL only in
#     stores, layers included downwards only, route rows only in *_routes.c);
#  1. build every binary the tests need (the service, its ASan+UBSan build, the unit tests, the
#     fuzz targets, the bench probe) with make -j2;
#  2. the unit tests and the fakes' self-tests (the fake Stripe is held to Stripe's OpenAPI
#     description, fetched from npm into build/stripe-openapi.json by test-build);
#  3. the four API passes side by side (SQLite, PostgreSQL, SQLite under ASan+UBSan, and the
#     files marked `pooler` again on PostgreSQL behind a PgBouncer in transaction pooling, as
#     production runs it), each spread over pytest-xdist workers: the tests mostly wait on
#     sockets and clocks, so they overlap well; each pass's output goes to
#     build/test-logs/<pass>.log and is shown when it ends (whole, when it failed);
#  4. the fuzz targets replay their regressions and committed seeds (timed fuzzing is `make fuzz`).
# Prints how long each step took; exits non-zero when any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=build/test-logs
mkdir -p "$logs"
t0=$(date +%s)
timings=()

step() { # step NAME COMMAND...: runs a step in the foreground, records its time, stops on failure
  local name=$1 s rc
  shift
  s=$(date +%s)
  echo "== $name"
  "$@"
  rc=$?
  timings+=("$(printf '%-12s %4ss' "$name" $(($(date +%s) - s)))")
  if [ $rc -ne 0 ]; then
    echo "== $name FAILED"
    summary
    exit $rc
  fi
}

summary() {
  echo "== timings"
  printf '  %s\n' "${timings[@]}"
  echo "  total        $(($(date +%s) - t0))s"
}

step shape scripts/check_shape.py
step build make -j2 --no-print-directory test-build
step unit make --no-print-directory unit
step fakes make --no-print-directory fakes

# the API passes, side by side
s=$(date +%s)
passes=(sqlite postgres asan pgbouncer)
echo "== api: ${passes[*]} side by side (logs in $logs/)"
declare -A pid
for pass in "${passes[@]}"; do
  jobs=3
  [ "$pass" = pgbouncer ] && jobs=2 # a part of the suite
  # the pass's CPU time (its processes' user and system; not the PostgreSQL server's) in <pass>.cpu
  (
    make --no-print-directory "api-$pass" API_JOBS=$jobs >"$logs/$pass.log" 2>&1
    rc=$?
    times >"$logs/$pass.cpu" # (not in a pipe, whose subshell has no children) its second line: the children's
    exit $rc
  ) &
  pid[$pass]=$!
done
failed=()
for pass in "${passes[@]}"; do
  if wait "${pid[$pass]}"; then
    echo "-- api-$pass: $(grep -E '^[0-9]+ passed' "$logs/$pass.log" | tail -1) (CPU user, system: $(tail -1 "$logs/$pass.cpu"))"
  else
    failed+=("$pass")
    echo "-- api-$pass FAILED:"
    cat "$logs/$pass.log"
  fi
done
timings+=("$(printf '%-12s %4ss' api $(($(date +%s) - s)))")
if [ ${#failed[@]} -gt 0 ]; then
  echo "== api FAILED: ${failed[*]}"
  summary
  exit 1
fi

step fuzz-short make --no-print-directory fuzz-short
summary
