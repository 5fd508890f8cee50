#!/usr/bin/env bash
# `make test`: everything CI runs, in the order that keeps 2 cores busy.
#  0. the tree's shape (scripts/check_shape.py: no include cycle between domains, SQL only in
#     stores, layers included downwards only, route rows only in *_routes.c, one owner per
#     table);
#  1. build what the API tests need (the service, its ASan+UBSan build, the bench probe) with
#     make -j2, and fetch Stripe's OpenAPI description from npm (build/stripe-openapi.json);
#  2. the four API passes side by side, each spread over pytest-xdist workers: every test on
#     SQLite under ASan+UBSan but those it cannot run (marked `once` or `unsanitized`: browsers,
#     the client package, time bounds of hung services), which run on the release binary
#     (api-unsanitized); every test on PostgreSQL with the release binary; and the files marked
#     `pooler` again on PostgreSQL behind a PgBouncer in transaction pooling, as production runs
#     it, once the unsanitized pass has ended (the run's first minutes are CPU-bound). The
#     sanitized build is the release build plus the sanitizers (same -O2), so a whole plain
#     SQLite pass beside it would test the same code twice and cost the run its time goal;
#     meanwhile, at the lowest CPU priority, the rest: the unit tests are built and the fuzz
#     targets linked for replay (with the sanitized build's objects: nothing is compiled twice,
#     so the rest ends before the API passes), the unit tests run (at the normal priority: some
#     time things in hundreds of milliseconds), the fakes' self-tests (the
#     fake Stripe is held to Stripe's description), and the fuzz targets replay their
#     regressions and committed seeds (timed fuzzing, built by clang, is `make fuzz`);
#  each side job's output goes to build/test-logs/<job>.log and is shown when it ends (whole,
#  when it failed). Prints how long each step took and each API pass's CPU time; exits
#  non-zero when any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=build/test-logs
mkdir -p "$logs"
t0=$(date +%s)
timings=()

summary() {
  echo "== timings"
  printf '  %s\n' "${timings[@]}"
  echo "  total        $(($(date +%s) - t0))s"
}

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

step shape scripts/check_shape.py
step build make -j2 --no-print-directory test-build-api

declare -A pid
started=$(date +%s)
# the API passes, side by side; each pass's CPU time (its processes' user and system, not the
# PostgreSQL server's) goes to <pass>.cpu: `times` outside a pipe, whose subshell has no children
passes=(asan postgres unsanitized pgbouncer)
echo "== api: ${passes[*]} side by side, and the rest at a low priority (logs in $logs/)"
rm -f "$logs"/*.cpu
for pass in "${passes[@]}"; do
  jobs=3
  case $pass in unsanitized | pgbouncer) jobs=2 ;; esac # a part of the suite
  (
    # the PgBouncer pass waits for the unsanitized one: the first minutes are CPU-bound (every
    # pass, the browsers, the fuzz build), the last ones are not (the two long passes' waits)
    if [ "$pass" = pgbouncer ]; then while [ ! -e "$logs/unsanitized.cpu" ]; do sleep 1; done; fi
    make --no-print-directory "api-$pass" API_JOBS=$jobs >"$logs/$pass.log" 2>&1
    rc=$?
    times >"$logs/$pass.cpu"
    exit $rc
  ) &
  pid[$pass]=$!
done
# the rest, one after the other, each timed in rest.times
rest=(test-build-rest unit fakes fuzz-short)
rm -f "$logs/rest.times"
(
  rc=0
  for job in "${rest[@]}"; do
    s=$(date +%s)
    # the unit tests run at the normal priority (12 s of CPU): a few time the service in
    # hundreds of milliseconds (the acceptor's 300 ms wait for a first request), and at the
    # lowest one, beside the API passes, a thread can wait longer than that for a core
    level=19
    [ "$job" = unit ] && level=0
    nice -n "$level" make -j2 --no-print-directory "$job" >"$logs/$job.log" 2>&1 || { rc=1; echo "$job FAILED" >>"$logs/rest.times"; break; }
    printf '%-12s %4ss\n' "$job" $(($(date +%s) - s)) >>"$logs/rest.times"
  done
  exit $rc
) &
pid[rest]=$!

failed=()
for job in "${passes[@]}" rest; do
  if wait "${pid[$job]}"; then
    if [ "$job" = rest ]; then
      echo "-- the rest: $(tr '\n' ' ' <"$logs/rest.times")"
    else
      echo "-- api-$job: $(grep -E '^[0-9]+ passed' "$logs/$job.log" | tail -1) (CPU user, system: $(tail -1 "$logs/$job.cpu"))"
    fi
  else
    failed+=("$job")
    if [ "$job" = rest ]; then
      echo "-- the rest FAILED: $(tr '\n' ' ' <"$logs/rest.times")"
      for log in "${rest[@]}"; do [ -f "$logs/$log.log" ] && cat "$logs/$log.log"; done
    else
      echo "-- api-$job FAILED:"
      cat "$logs/$job.log"
    fi
  fi
done
timings+=("$(printf '%-12s %4ss' "api, rest" $(($(date +%s) - started)))")
if [ ${#failed[@]} -gt 0 ]; then
  echo "== FAILED: ${failed[*]}"
  summary
  exit 1
fi
summary
