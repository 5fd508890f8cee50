#!/usr/bin/env bash
# Where a write's time goes (issue 37, docs/performance.md): the service on SQLite (or
# PostgreSQL) in production mode, seeded by bench/seed_jobs.py (JOBS jobs), then POST /quotes
# (bench/quotes.lua, every request a new pair) at wrk -t2 -c64 for SECONDS_EACH under
# `perf record -e cpu-clock -g` of the server: the server's CPU per request, perf's split by
# object and symbol, and, with OFFCPU=1, `perf trace -s` of the server's system calls (what
# its threads wait in). Prints the tables and keeps the reports in RESULTS
# (bench/results/write-profile/).
# Knobs: SECONDS_EACH (10), ENGINES (sqlite), JOBS (20000), OFFCPU (0), PERF (1), CALLGRAPH (fp; dwarf
# for stacks through the libraries), PERF_FREQ, HOLD (seconds to keep the server up), RESULTS, BIN,
# STREAM (1: the feed provider's live-update stream open throughout, matching none of the jobs
# quoted; quoter: the first quoter's, matching all of them and getting their job.updated).
# BENCH_ORDER=spread (bench/quotes.lua): consecutive quotes on different jobs, as customers' jobs are
# quoted, rather than the 64 connections quoting one job at a time.
set -euo pipefail

# shellcheck source=bench/lib.sh
ENGINES=${ENGINES:-sqlite}
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SECONDS_EACH=${SECONDS_EACH:-10}
JOBS=${JOBS:-20000}
PERF=${PERF:-1}
RESULTS=${RESULTS:-$BENCH/results/write-profile}
for tool in wrk perf "$PY"; do command -v "$tool" >/dev/null || die "$tool not found (linux-perf, scripts/deps.sh bench)"; done
mkdir -p "$RESULTS"


JWT_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
: >"$RESULTS/summary.txt"
for engine in $ENGINES; do
  start_engine "$engine"
  base="http://127.0.0.1:$SRV_PORT"
  seed_to "$engine" "$JOBS"
  files=$TMP/files-$engine
  pairs=$(($(wc -l <"$files/quoters.tokens") * $(wc -l <"$files/open.jobs")))
  export BENCH_TOKENS=$files/quoters.tokens BENCH_JOBS=$files/open.jobs BENCH_THREADS=2
  stream= token=
  case ${STREAM:-0} in # a provider's stream: the feed provider's (none of the quoted jobs
    # matches it), or the first quoter's (every one does)
  1) token=$(cat "$files/feed.token") ;;
  quoter) token=$(head -1 "$files/quoters.tokens") ;;
  esac
  if [ -n "$token" ]; then
    curl -sN -H "Authorization: Bearer $token" "$base/events" >/dev/null &
    stream=$!
  fi
  BENCH_START=0 wrk_run "$engine-quotes-warmup" 2 64 3 "$base" -s "$BENCH/quotes.lua"
  before=$(cpu_ticks "$SRV_PID")
  out=$RESULTS/$engine-quotes
  profile_start "$out" "$SECONDS_EACH"
  BENCH_START=$((pairs / 2)) wrk_run "$engine-quotes" 2 64 "$SECONDS_EACH" "$base" --latency -s "$BENCH/quotes.lua"
  profile_finish
  after=$(cpu_ticks "$SRV_PID")
  line=$(grep '^BENCH ' "$RAW/$engine-quotes.txt")
  requests=$(field requests "$line")
  cp "$RAW/$engine-quotes.txt" "$out.wrk.txt"
  printf '%s POST /quotes: %s requests/s, p99 %s ms (wrk -t2 -c64, %s s), statuses %s, %.1f us of server CPU per request, load %s\n' \
    "$engine" "$(field rps "$line")" "$(field p99_ms "$line")" "$SECONDS_EACH" \
    "$(grep -o 'status_[0-9]*=[0-9]*' <<<"$line" | paste -sd, -)" \
    "$(echo "($after - $before) * 1000000 / $(getconf CLK_TCK) / $requests" | bc -l)" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$RESULTS/summary.txt"
  [ "$PERF" = 1 ] && sed 's/^/    /' "$out.dso.txt" | tee -a "$RESULTS/summary.txt"
  if [ -n "${HOLD:-}" ]; then log "holding the server $SRV_PID on $base for $HOLD s"; sleep "$HOLD"; fi
  [ -n "$stream" ] && kill "$stream"
  stop_pid "$SRV_PID"
  cp "$SRV_LOG" "$out.server.log"
  [ "$engine" = postgres ] && stop_pg
done
log "reports in $RESULTS"
