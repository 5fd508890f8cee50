#!/usr/bin/env bash
# Issue 36 item 4: the service on one core against two (`make bench-cores`; docs/performance.md).
#
# The service on SQLite in production mode, seeded by bench/seed_jobs.py (JOBS jobs, 200 in the
# feed provider's feed). For each of GET /health, GET /users/me, the provider feed (GET /jobs)
# and POST /quotes (every request a new provider and job pair, only 201s counted), wrk -t2 -c64
# for DURATION s after WARMUP s, twice: the server's threads pinned to core 0 with wrk on core 1
# ("one"), then the server on cores 0 and 1 with wrk unpinned beside it ("two"), alternating
# over ROUNDS rounds. Prints requests/s and the server's CPU time per request (utime + stime
# over the requests served) of each, and the ratio two / one, the goal being 1.8x or more.
# On a machine of two cores the load generator needs one of the server's two cores in "two":
# the ratio then shows how much of a core wrk takes, and the CPU per request whether the
# server's own cost grows with a second core (locks, cache lines), which is what would stop it
# scaling on a machine with cores to spare.
#
# Output: bench/results/cores/ (latest.txt, cores.tsv, machine.txt, raw/).
# Knobs: DURATION (10), WARMUP (3), ROUNDS (2), JOBS (100000), RESULTS, BIN.
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROUNDS=${ROUNDS:-2}
JOBS=${JOBS:-100000}
RESULTS=${RESULTS:-$BENCH/results/cores}
[ "$(nproc)" -ge 2 ] || die "needs two cores"
for tool in wrk taskset "$PY"; do command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh bench)"; done

OUT=$TMP/cores.tsv
printf 'route\tcores\tround\trequests_per_s\tcounted\tcpu_us_per_request\n' >"$OUT"

# run route cores round slot url [wrk args...]: one measurement, its row in $OUT. The server is
# pinned first; slot picks POST /quotes's slice of pairs (no pair is quoted twice).
run() {
  local route=$1 cores=$2 round=$3 slot=$4 url=$5 raw=$1-$2-r$3
  shift 5
  local server_cpus=0 WRK_CPUS=1
  [ "$cores" = two ] && server_cpus=0,1 WRK_CPUS=0,1
  taskset -a -p -c "$server_cpus" "$SRV_PID" >/dev/null
  BENCH_START=$((2 * slot * SLICE)) wrk_run "$raw-warmup" 2 64 "$WARMUP" "$url" "$@"
  BENCH_START=$(((2 * slot + 1) * SLICE)) cpu_wrk_run "$raw" 2 64 "$DURATION" "$url" --latency "$@"
  local line counted
  line=$(grep '^BENCH ' "$RAW/$raw.txt" | tail -1) || die_with "$RAW/$raw.txt" "no BENCH line"
  # the answers that did the work: 201s for POST /quotes (quotes.lua counts them), 2xx for the reads
  if [ "$route" = quotes ]; then
    counted=$(grep -o 'status_201=[0-9]*' <<<"$line" | cut -d= -f2 || echo 0)
  else
    counted=$(($(field requests "$line") - $(field non2xx "$line")))
  fi
  [ "${counted:-0}" -gt 0 ] || die_with "$RAW/$raw.txt" "no successful answer ($route)"
  printf '%s\t%s\t%s\t%.0f\t%s\t%.1f\n' "$route" "$cores" "$round" \
    "$(echo "$counted / $(field duration_s "$line")" | bc -l)" "$counted" \
    "$(echo "$CPU_TICKS * 1000000 / $CLK_TCK / $counted" | bc -l)" >>"$OUT"
  log "  $route, $cores core(s): $(tail -1 "$OUT" | cut -f4) req/s, $(tail -1 "$OUT" | cut -f6) us CPU/request"
}

begin_run
start_engine sqlite
log "seeding $JOBS jobs"
seed_to sqlite "$JOBS"
base="http://127.0.0.1:$SRV_PORT"
files=$TMP/files-sqlite
customer="Authorization: Bearer $(cat "$files/customer.token")"
feed="Authorization: Bearer $(cat "$files/feed.token")"
export BENCH_TOKENS=$files/quoters.tokens BENCH_JOBS=$files/open.jobs BENCH_THREADS=2
SLICE=$(($(quote_pairs "$files") / (4 * ROUNDS)))
slot=0
for ((round = 1; round <= ROUNDS; round++)); do
  log "== round $round"
  for cores in one two; do
    run health "$cores" "$round" 0 "$base/health" -s "$BENCH/stats.lua"
    run users_me "$cores" "$round" 0 "$base/users/me" -H "$customer" -s "$BENCH/stats.lua"
    run feed "$cores" "$round" 0 "$base/jobs" -H "$feed" -s "$BENCH/stats.lua"
    run quotes "$cores" "$round" "$slot" "$base" -s "$BENCH/quotes.lua"
    slot=$((slot + 1))
  done
done

mkdir -p "$RESULTS"
rm -rf "$RESULTS/raw"
cp -r "$RAW" "$RESULTS/raw"
cp "$OUT" "$RESULTS/cores.tsv"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cores: $(nproc), idle before run: $IDLE_BEFORE%, idle after run: $(cpu_idle_pct)%"
  echo "settings: wrk -t2 -c64, DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS JOBS=$JOBS"
} >"$RESULTS/machine.txt"
"$PY" - "$OUT" <<'EOF' | tee "$RESULTS/latest.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("| route | one core: req/s (CPU us/req) | two cores: req/s (CPU us/req) | two / one | goal 1.8x |")
print("| --- | ---: | ---: | ---: | --- |")
for route in ("health", "users_me", "feed", "quotes"):
    got = {}
    for cores in ("one", "two"):
        mine = [r for r in rows if r["route"] == route and r["cores"] == cores]
        got[cores] = (statistics.median(float(r["requests_per_s"]) for r in mine),
                      statistics.median(float(r["cpu_us_per_request"]) for r in mine))
    ratio = got["two"][0] / got["one"][0]
    print(f"| {route} | {got['one'][0]:,.0f} ({got['one'][1]:.1f}) | {got['two'][0]:,.0f} ({got['two'][1]:.1f}) "
          f"| {ratio:.2f} | {'met' if ratio >= 1.8 else 'MISSED'} |")
EOF
cat "$RESULTS/machine.txt"
log "results in $RESULTS"
