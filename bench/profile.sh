#!/usr/bin/env bash
# Where a request's time goes (docs/performance.md, issue 26): the service on SQLite in
# production mode, wrk -t1 -c32 on GET /health and then on GET /users/me, each for SECONDS
# under `perf record -e cpu-clock -g` of the server, and for each the server's CPU per request
# and perf's split by object (the service, libmicrohttpd, libc, SQLite, the kernel) and by
# symbol; with READS=1, then issue 36's reads as bench/run.sh's step 3 makes them
# (bench/seed_reads.py: GET /jobs/:id, /quotes/job/:jobId, the notifications, a page of
# messages), each the same way. Prints the tables and keeps the perf reports in RESULTS
# (bench/results/profile/). Knobs: SECONDS_EACH (8), ENGINES (sqlite postgres), READS (0), RESULTS, BIN.
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SECONDS_EACH=${SECONDS_EACH:-8}
READS=${READS:-0}
RESULTS=${RESULTS:-$BENCH/results/profile}
for tool in wrk perf "$PY"; do command -v "$tool" >/dev/null || die "$tool not found (linux-perf, scripts/deps.sh bench)"; done
mkdir -p "$RESULTS"


profile() { # engine name url [wrk args]
  local engine=$1 name=$2 url=$3 before after requests
  shift 3
  wrk_run "$engine-$name-warmup" 1 32 2 "$url" "$@"
  before=$(cpu_ticks "$SRV_PID")
  perf record -e cpu-clock -g -p "$SRV_PID" -o "$TMP/$engine-$name.perf" -- sleep "$SECONDS_EACH" >/dev/null 2>&1 &
  local perf_pid=$!
  wrk_run "$engine-$name" 1 32 "$SECONDS_EACH" "$url" --latency -s "$BENCH/stats.lua" "$@"
  wait "$perf_pid" || true
  after=$(cpu_ticks "$SRV_PID")
  requests=$(field requests "$(grep '^BENCH ' "$RAW/$engine-$name.txt")")
  local out=$RESULTS/$engine-$name
  perf_tables "$TMP/$engine-$name.perf" "$out" 40 40
  printf '%s %s: %s requests/s (wrk -t1 -c32), %.1f us of server CPU per request\n' "$engine" "$name" \
    "$(field rps "$(grep '^BENCH ' "$RAW/$engine-$name.txt")")" \
    "$(echo "($after - $before) * 1000000 / $(getconf CLK_TCK) / $requests" | bc -l)" | tee -a "$RESULTS/summary.txt"
  sed 's/^/    /' "$out.dso.txt" | tee -a "$RESULTS/summary.txt"
}

JWT_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
: >"$RESULTS/summary.txt"
for engine in $ENGINES; do
  start_engine "$engine"
  base="http://127.0.0.1:$SRV_PORT"
  token=$(register "$base" "profile-$engine@example.com" "profile-password-1")
  profile "$engine" health "$base/health"
  profile "$engine" users_me "$base/users/me" -H "Authorization: Bearer $token"
  if [ "$READS" = 1 ]; then
    "$PY" "$BENCH/seed_reads.py" "$base" "$TMP/reads-$engine.txt"
    reader="Authorization: Bearer $(head -1 "$TMP/reads-$engine.txt")"
    while read -r scenario path <&3; do
      profile "$engine" "$scenario" "$base$path" -H "$reader"
    done 3< <(tail -n +2 "$TMP/reads-$engine.txt")
  fi
  stop_pid "$SRV_PID"
  [ "$engine" = postgres ] && stop_pg
done
log "perf reports by object and by symbol in $RESULTS"
