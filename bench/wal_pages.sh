#!/usr/bin/env bash
# Which of SQLite's b-trees each everyday write dirties, and how many WAL frames it costs
# (issue 37, docs/performance.md): the service on SQLite in production mode, seeded as
# bench/writes.sh seeds it, then bench/wal_pages.py's writes one at a time, one kind after the
# other, each kind on a WAL truncated first.
# Knobs: WRITES ("quotes jobs messages status accept"), COUNT (20 of each), JOBS (20000),
# SERVER_ENV, BIN, RESULTS (bench/results/wal-pages/).
set -euo pipefail

# shellcheck source=bench/lib.sh
ENGINES=sqlite
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
JOBS=${JOBS:-20000}
COUNT=${COUNT:-20}
RESULTS=${RESULTS:-$BENCH/results/wal-pages}
mkdir -p "$RESULTS"

JWT_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
start_engine sqlite
seed_to sqlite "$JOBS"
files=$TMP/files-sqlite
"$PY" "$BENCH/seed_jobs.py" writes --engine sqlite --db "$DB" --state "$TMP/state-sqlite.json" \
  --target "$COUNT" --secret "$JWT_SECRET" --out "$files"
save_cards "http://127.0.0.1:$SRV_PORT" "$files"
: >"$RESULTS/summary.txt"
for write in ${WRITES:-quotes jobs messages status accept}; do
  "$PY" "$BENCH/wal_pages.py" --db "$DB" --base "http://127.0.0.1:$SRV_PORT" --files "$files" --write "$write" \
    --count "$COUNT" | tee -a "$RESULTS/summary.txt"
  echo | tee -a "$RESULTS/summary.txt"
done
stop_pid "$SRV_PID"
log "report in $RESULTS/summary.txt"
