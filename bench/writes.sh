#!/usr/bin/env bash
# The everyday writes (`make bench-writes`, part of `make bench`; issue 37, items 3 and 4;
# docs/performance.md says what it measures).
#
# Per engine (SQLite, then a private PostgreSQL cluster), on one database seeded by
# bench/seed_jobs.py (init, JOBS filler jobs, then `writes`: POOL of each kind of write below,
# each request a valid new write), wrk -t2 -c64, WARMUP s then DURATION s each, in this order:
#   POST /jobs                  a customer posts a lawn-care job for a date (not ASAP: no push
#                               fan-out) at home, the customers in 500 ZIPs (not one feed);
#   POST /jobs/:id/messages     on an accepted job, its customer and its provider in turn;
#   PATCH /jobs/:id/status      ACCEPTED -> ON_THE_WAY by the assigned provider (the one move
#                               that calls no payment processor and needs no photo);
#   POST /quotes/:id/accept     a job's customer accepts one of its two quotes; the customer has
#                               a saved card (POST /payments/payment-method), so the simulated
#                               processor (no STRIPE_SECRET_KEY) authorizes the payment;
#   POST /quotes                for reference (bench/quotes.lua, a new provider and job pair);
#   POST /quotes on two         PostgreSQL only: a second instance on the same database, wrk's
#     instances                 two threads one on each (BENCH_ADDRS), CPU of both (issue 36.1:
#                               two instances >= 1.5x one).
# Only 2xx answers count as served; every answer is counted by status (bench/writes.lua), so
# a broken run shows its non-2xx answers. Each row also has the service's CPU time per request
# (bench/lib.sh, measure; PostgreSQL's own processes are not counted). Registration is left
# out: its cost is bcrypt's, by design.
# Goals: each of the four everyday writes >= 2,000 2xx answers a second on SQLite; on
# PostgreSQL >= 0.7x its SQLite figure (bench/summarize_writes.py).
#
# Output: bench/results/writes/ (latest.txt, latest.tsv, machine.txt, raw/).
# Knobs: ENGINES, DURATION (10), WARMUP (3), POOL (80000 writes of each kind seeded), JOBS
# (20000 filler jobs), WRITES (which of "jobs messages status accept quotes quotes_two", all by
# default), RESULTS (bench/results/writes), BIN, SERVER_ENV, AUTOGROUP, PERF (1: each measured
# write under `perf record -g` of the server, its split by object, symbol and thread in
# RESULTS/profile/; CALLGRAPH fp or dwarf), OFFCPU (1: `perf trace -s` of the server's system
# calls and their time per thread meanwhile, RESULTS/profile/*.trace.txt), PGSTAT (1: PostgreSQL's
# statements of each measured write by time, from pg_stat_statements, RESULTS/profile/*.statements.txt),
# STATS (settled: PostgreSQL's statistics brought up to date after each warm-up; asis: not).
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
POOL=${POOL:-80000}
WRITES=${WRITES:-jobs messages status accept quotes quotes_two}
JOBS=${JOBS:-20000}
RESULTS=${RESULTS:-$BENCH/results/writes}
THREADS=2
CONNS=64

for tool in wrk psql "$PY"; do command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh bench)"; done

# write engine scenario [VAR=value...]: one route through bench/writes.lua (the variables are
# its BENCH_*, exported for the two runs; BENCH_TOKENS defaults to writers.tokens), warm-up then measurement; the measurement starts
# past every request number the warm-up took (next_k, stats.lua: its count with a margin was
# not enough when wrk's two threads ran unevenly, and the first moves of a measurement found
# their jobs moved: 409s), so every request is a new write
write() {
  local engine=$1 scenario=$2 raw=$1-$2 v warm
  shift 2
  wanted "$scenario" || return 0
  export BENCH_TOKENS=$FILES/writers.tokens BENCH_THREADS=$THREADS
  for v in "$@"; do export "${v?}"; done
  BENCH_START=0 wrk_run "$raw-warmup" "$THREADS" "$CONNS" "$WARMUP" "$BASE" -s "$BENCH/writes.lua"
  warm=$(field next_k "$(grep '^BENCH ' "$RAW/$raw-warmup.txt" | tail -1)")
  settle_stats "$engine"
  profile_start "$RESULTS/profile/$raw" "$DURATION"
  BENCH_START=$((warm + 4 * CONNS)) cpu_wrk_run "$raw" "$THREADS" "$CONNS" "$DURATION" "$BASE" --latency \
    -s "$BENCH/writes.lua"
  profile_finish
  record "$engine" "$scenario" "$THREADS" "$CONNS" "$RAW/$raw.txt" "$CPU_TICKS"
  for v in "$@"; do unset "${v%%=*}"; done
  unset BENCH_TOKENS BENCH_THREADS
}

wanted() { [[ " $WRITES " == *" $1 "* ]]; }

bench_engine() {
  local engine=$1
  log "== $engine"
  start_engine "$engine"
  BASE="http://127.0.0.1:$SRV_PORT"
  FILES=$TMP/files-$engine
  log "seeding: $JOBS filler jobs, then $POOL writes of each kind"
  seed_to "$engine" "$JOBS"
  "$PY" "$BENCH/seed_jobs.py" writes --engine "$engine" --db "$DB" --state "$TMP/state-$engine.json" \
    --target "$POOL" --secret "$JWT_SECRET" --out "$FILES"
  save_cards "$BASE" "$FILES"

  log "the writes (-t$THREADS -c$CONNS, ${WARMUP}s warm-up, ${DURATION}s measured)"
  local when
  when=$(date -u -d '+30 days' +%Y-%m-%dT15:00:00.000Z)
  write "$engine" jobs BENCH_PATH=/jobs BENCH_TOKENS="$FILES/customers.tokens" \
    BENCH_BODY="{\"service\":\"lawncare\",\"preferredAt\":\"$when\",\"description\":\"Bench job %d: mow the lawn\"}"
  write "$engine" messages BENCH_TARGETS="$FILES/messages.targets" \
    BENCH_BODY='{"content":"Bench message %d: on my way at nine?"}'
  write "$engine" status BENCH_TARGETS="$FILES/status.targets" BENCH_METHOD=PATCH BENCH_BODY='{"status":"ON_THE_WAY"}'
  write "$engine" accept BENCH_TARGETS="$FILES/accept.targets" BENCH_BODY=
  # POST /quotes as bench/jobs.sh sends it: the warm-up and the measurement on disjoint pairs
  local pairs
  pairs=$(quote_pairs "$FILES")
  wanted quotes && measure_quotes "$engine" quotes "$engine-quotes" "$BASE" "$FILES" 0 $((pairs / 2))
  if [ "$engine" = postgres ] && wanted quotes_two; then # pairs of their own: past the first's
    local first=$SRV_PID first_port=$SRV_PORT first_log=$SRV_LOG
    start_service postgres-b "$PG_URL"
    BENCH_ADDRS=127.0.0.1:$first_port,127.0.0.1:$SRV_PORT CPU_PIDS="$first $SRV_PID" \
      measure_quotes "$engine" quotes_two "$engine-quotes-two" "$BASE" "$FILES" $((pairs / 4)) $((pairs * 3 / 4))
    stop_pid "$SRV_PID"
    cat "$SRV_LOG" >>"$first_log" # its 5xx counted with the first's
    SRV_PID=$first SRV_PORT=$first_port SRV_LOG=$first_log
  fi
  grep -c '"status":5' "$SRV_LOG" | sed "s/^/$engine\t/" >>"$TMP/errors5xx.tsv" || true

  stop_pid "$SRV_PID"
  [ "$engine" = postgres ] && stop_pg
  return 0
}

# ------------------------------------------------------------------ main

: >"$TMP/errors5xx.tsv"
begin_run
each_engine
mkdir -p "$RESULTS"
cp "$TMP/errors5xx.tsv" "$RESULTS/"
write_results "$RESULTS" "$BENCH/summarize_writes.py" \
  "settings: DURATION=${DURATION}s WARMUP=${WARMUP}s POOL=$POOL JOBS=$JOBS"
