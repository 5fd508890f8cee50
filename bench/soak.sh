#!/usr/bin/env bash
# The memory soak of issue 12 (`make soak`; docs/performance.md): on each engine, SOAK seconds
# (600) of mixed load at once: bench/soak.lua (GET /users/me, the provider feed, GET /jobs/:id
# and POST /quotes in turn, wrk -t1 -c8) and a steady trickle of logins at BCRYPT_COST=12
# (bench/login.lua, wrk -t1 -c1), on a database seeded with JOBS jobs (100,000). The server's
# RSS is sampled every 5 s. Goals: the RSS at the end within 10% of the RSS after the first
# minute, and the database's size at the end within 10% of its size at the start (after the
# seeding): the retention periods are shortened to a minute, pruned every 30 s (RETAIN_*,
# RETENTION_SWEEP; APP_ENV=development, since production refuses periods that short), so rows
# that grow with time (the live-update outbox, finished background work, idempotency keys,
# rate-limit counters) come and go many times over. Not part of `make test` or `make bench`.
#
# Output: bench/results/soak/ (latest.txt, rss-<engine>.tsv, latest.tsv, machine.txt, raw/).
# Knobs: ENGINES, SOAK (600), JOBS (100000), RESULTS, BIN, SERVER_ENV.
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SOAK=${SOAK:-600}
SERVER_ENV="APP_ENV=development RETAIN_EVENTS=1m RETAIN_IDEMPOTENCY=1m RETAIN_RATE_LIMITS=1m RETAIN_QUEUE=1m
  RETAIN_ELEVATIONS=1m RETAIN_MAIL=1m RETENTION_SWEEP=30s ${SERVER_ENV:-}"
JOBS=${JOBS:-100000}
RESULTS=${RESULTS:-$BENCH/results/soak}
((SOAK >= 120)) || die "SOAK must be at least 120 s (the first minute is the reference)"

for tool in wrk psql "$PY"; do command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh bench)"; done

# The bytes the database's data takes: PostgreSQL's pg_database_size; SQLite's pages in use
# (the file keeps the pages freed by deletions for reuse, so its length never shrinks).
db_size() {
  if [ "$1" = postgres ]; then
    psql "$2" -XAtc "SELECT pg_database_size(current_database())"
  else
    "$PY" -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
q = lambda p: c.execute("PRAGMA " + p).fetchone()[0]
print((q("page_count") - q("freelist_count")) * q("page_size"))' "$2"
  fi
}

soak_engine() {
  local engine=$1
  log "== $engine"
  start_engine "$engine"
  local base="http://127.0.0.1:$SRV_PORT" files=$TMP/files-$engine
  log "seeding $JOBS jobs"
  seed_to "$engine" "$JOBS"
  local email="soak-$engine-$RANDOM$RANDOM@example.com" password="soak-password-12"
  register "$base" "$email" "$password" >/dev/null

  local size_start
  size_start=$(db_size "$engine" "$DB")
  log "database size at the start: $size_start bytes"
  log "mixed load for ${SOAK}s; RSS every 5 s"
  local rss_tsv=$TMP/rss-$engine.tsv start=$SECONDS
  printf 'seconds\trss_kb\n' >"$rss_tsv"
  BENCH_CUSTOMER=$files/customer.token BENCH_FEED=$files/feed.token BENCH_PATHS=$files/detail.paths \
    BENCH_TOKENS=$files/quoters.tokens BENCH_JOBS=$files/open.jobs BENCH_THREADS=1 \
    timeout -k 5 $((SOAK + 30)) wrk -t1 -c8 -d"${SOAK}s" --timeout 10s --latency -s "$BENCH/soak.lua" "$base" \
    >"$RAW/$engine-soak_mixed.txt" 2>&1 &
  local mixed=$!
  track_pid "$mixed"
  BENCH_EMAIL=$email BENCH_PASSWORD=$password timeout -k 5 $((SOAK + 30)) \
    wrk -t1 -c1 -d"${SOAK}s" --timeout 10s --latency -s "$BENCH/login.lua" "$base/auth/login" \
    >"$RAW/$engine-soak_logins.txt" 2>&1 &
  local logins=$!
  track_pid "$logins"
  while kill -0 "$mixed" 2>/dev/null; do
    printf '%s\t%s\n' $((SECONDS - start)) "$(awk '/^VmRSS/ {print $2}' "/proc/$SRV_PID/status")" >>"$rss_tsv"
    sleep 5
  done
  local rc=0
  wait "$mixed" || rc=$?
  forget_pid "$mixed"
  [ "$rc" = 0 ] || die_with "$RAW/$engine-soak_mixed.txt" "the mixed load failed ($rc)"
  wait "$logins" || true
  forget_pid "$logins"
  local size_end
  size_end=$(db_size "$engine" "$DB")
  log "database size at the end: $size_end bytes"
  printf '%s\t%s\t%s\n' "$engine" "$size_start" "$size_end" >>"$TMP/dbsize.tsv"
  record "$engine" soak_mixed 1 8 "$RAW/$engine-soak_mixed.txt"
  record "$engine" soak_logins 1 1 "$RAW/$engine-soak_logins.txt"
  printf '%s\t%s\n' "$engine" "$(awk '/^VmHWM/ {print $2}' "/proc/$SRV_PID/status")" >>"$TMP/hwm.tsv"
  grep -c '"status":5' "$SRV_LOG" | sed "s/^/$engine\t/" >>"$TMP/errors5xx.tsv" || true
  cp "$rss_tsv" "$RAW/"
  stop_pid "$SRV_PID"
  [ "$engine" = postgres ] && stop_pg
  return 0
}

JWT_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
: >"$TMP/hwm.tsv"
: >"$TMP/errors5xx.tsv"
: >"$TMP/dbsize.tsv"
IDLE_BEFORE=$(cpu_idle_pct)
log "CPU idle before the run: $IDLE_BEFORE%"
for engine in $ENGINES; do
  case $engine in sqlite | postgres) soak_engine "$engine" ;; *) die "unknown engine $engine" ;; esac
done
mkdir -p "$RESULTS"
cp "$TMP/hwm.tsv" "$TMP/errors5xx.tsv" "$TMP/dbsize.tsv" "$RESULTS/"
for engine in $ENGINES; do cp "$RAW/rss-$engine.tsv" "$RESULTS/"; done
write_results "$RESULTS" "$BENCH/summarize_soak.py" "settings: SOAK=${SOAK}s JOBS=${JOBS}"
