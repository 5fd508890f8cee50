#!/usr/bin/env bash
# Marketplace benchmark (`make bench-jobs`); docs/performance.md explains what it measures.
#
# Per engine (SQLite, then a private PostgreSQL cluster), on one database that grows:
#   1. seeded with 10,000 jobs: p50 of the provider feed (GET /jobs, 200 matching open jobs)
#      and of GET /jobs/:id (the owner's view: customer, 3 quotes, payment), wrk -t1 -c4;
#   2. grown to 100,000 jobs: the same two reads (the feed also gzip-compressed) and POST /quotes,
#      requests/s and p99 at wrk -t2 -c64, and the two -c4 p50s again;
#   3. grown to 1,000,000 jobs: the two -c4 p50s again.
# Every measurement also gives the server's CPU time per request (bench/lib.sh, measure).
# Goal: the p50s at 1,000,000 jobs are less than twice those at 10,000 (indexes carry the load).
# Rows are seeded straight into the tables by bench/seed_jobs.py while the service idles.
#
# Output: bench/results/jobs/ (latest.txt, latest.tsv, machine.txt, raw/).
# Knobs: ENGINES, DURATION (10), WARMUP (3), JOBS_SMALL (10000), JOBS_MID (100000),
# JOBS_LARGE (1000000), RESULTS (bench/results/jobs), BIN, SERVER_ENV.
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
JOBS_SMALL=${JOBS_SMALL:-10000}
JOBS_MID=${JOBS_MID:-100000}
JOBS_LARGE=${JOBS_LARGE:-1000000}
RESULTS=${RESULTS:-$BENCH/results/jobs}

for tool in wrk psql "$PY"; do command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh bench)"; done

seed() { # engine db command [args...]
  local engine=$1 db=$2 cmd=$3
  shift 3
  "$PY" "$BENCH/seed_jobs.py" "$cmd" --engine "$engine" --db "$db" --state "$TMP/state-$engine.json" "$@"
}

# p50s of the two reads at the current size (-t1 -c4); label: jobs_10k, jobs_100k, ...
measure_reads_c4() {
  local engine=$1 label=$2 base=$3 files=$4
  measure "$engine" "feed_c4_$label" 1 4 "$base/jobs" -H "Authorization: Bearer $(cat "$files/feed.token")"
  BENCH_PATHS=$files/detail.paths measure "$engine" "job_c4_$label" 1 4 "$base" \
    -H "Authorization: Bearer $(cat "$files/customer.token")" -s "$BENCH/paths.lua"
}

check_feed() { # base token: the feed must hold the 200 seeded jobs, or the numbers mean nothing
  "$PY" - "$@" <<'EOF'
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/jobs", headers={"Authorization": "Bearer " + sys.argv[2]})
with urllib.request.urlopen(req, timeout=30) as r:
    n = len(json.load(r)["jobs"])
sys.exit(0 if n == 200 else f"the feed holds {n} jobs, not 200")
EOF
}

bench_engine() {
  local engine=$1 db
  log "== $engine"
  start_engine "$engine"
  db=$DB
  local base="http://127.0.0.1:$SRV_PORT" files=$TMP/files-$engine
  seed "$engine" "$db" init
  log "seeding $JOBS_SMALL jobs"
  seed "$engine" "$db" grow --target "$JOBS_SMALL" >/dev/null
  "$PY" "$BENCH/seed_jobs.py" files --state "$TMP/state-$engine.json" --secret "$JWT_SECRET" --out "$files"
  check_feed "$base" "$(cat "$files/feed.token")"

  log "1. $JOBS_SMALL jobs: the two reads at -t1 -c4"
  measure_reads_c4 "$engine" small "$base" "$files"

  log "seeding up to $JOBS_MID jobs"
  seed "$engine" "$db" grow --target "$JOBS_MID" >/dev/null
  "$PY" "$BENCH/seed_jobs.py" files --state "$TMP/state-$engine.json" --secret "$JWT_SECRET" --out "$files"
  log "2. $JOBS_MID jobs: feed (plain and gzip), GET /jobs/:id, POST /quotes at -t2 -c64"
  measure "$engine" feed_c64 2 64 "$base/jobs" -H "Authorization: Bearer $(cat "$files/feed.token")"
  # the same feed as a mobile client takes it (gzip, about 7x smaller); the line above stays
  # the uncompressed measurement
  measure "$engine" feed_gzip_c64 2 64 "$base/jobs" -H "Authorization: Bearer $(cat "$files/feed.token")" \
    -H "Accept-Encoding: gzip"
  BENCH_PATHS=$files/detail.paths measure "$engine" job_c64 2 64 "$base" \
    -H "Authorization: Bearer $(cat "$files/customer.token")" -s "$BENCH/paths.lua"
  measure_quotes "$engine" quotes_c64 "$engine-quotes_c64" "$base" "$files" 0 $(($(quote_pairs "$files") / 2))
  measure_reads_c4 "$engine" mid "$base" "$files"

  log "seeding up to $JOBS_LARGE jobs"
  seed "$engine" "$db" grow --target "$JOBS_LARGE" >/dev/null
  check_feed "$base" "$(cat "$files/feed.token")"
  log "3. $JOBS_LARGE jobs: the two reads at -t1 -c4"
  measure_reads_c4 "$engine" large "$base" "$files"

  stop_pid "$SRV_PID"
  [ "$engine" = postgres ] && stop_pg
  return 0
}

# ------------------------------------------------------------------ main

begin_run
each_engine
write_results "$RESULTS" "$BENCH/summarize_jobs.py" \
  "sizes: JOBS_SMALL=$JOBS_SMALL JOBS_MID=$JOBS_MID JOBS_LARGE=$JOBS_LARGE"
