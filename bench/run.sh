#!/usr/bin/env bash
# Benchmark suite (`make bench`); docs/performance.md explains what it measures and why.
#
# In one run, on loopback only, with every load bounded by wrk's -d (and `timeout` around it):
#   1. nginx returning a static 200 vs the service's GET /health (wrk -t2 -c64 -d10s, three
#      rounds each, alternating);
#   2. GET /users/me with a valid token (same settings): the baseline later work compares to;
#   3. the reads of issue 36 item 2, each as in 2 (-t2 -c64, WARMUP then DURATION) as the job's
#      customer, on data bench/seed_reads.py makes through the API (one job with 5 quotes, a
#      60-message thread, 55 notifications; every read checked to answer 200 with a full page):
#      GET /jobs/:id, GET /quotes/job/:jobId, GET /users/me/notifications (the default page, the
#      last 50) and GET /jobs/:id/messages?providerId=..&limit=50 (the portal's page size);
#      beside wrk's count of answers >= 400, the server's access log counts every status of the
#      warm-up and run (a read with one answer that is not 2xx is reported failed); summarize.py
#      judges them and step 2 against the mean of step 1's /health rounds; about 1 min per engine;
#   4. a login flood at BCRYPT_COST=12 (32 connections, 30 s) with GET /health and then
#      GET /users/me probed during it (wrk -t1 -c4 -d10s), compared with the same probes on
#      the quiet server just before; then GET /users/me for 5 s more with bench/probe.c, whose
#      figures are the requests actually made (wrk's histogram adds the ones a stalled
#      connection did not send) and which tells a stall of the probe itself.
# Steps 1-4 run on SQLite and on PostgreSQL (a private throwaway cluster). Everything this
# script starts (nginx, the servers, the cluster, background wrk) and its temp dir are
# removed on exit, also on failure, Ctrl-C or SIGTERM (and by a watchdog on SIGKILL).
#
# Output: wrk's reports in bench/results/raw/, one row per measurement in
# bench/results/latest.tsv, and the summary table (also printed) in bench/results/latest.txt.
# Exits 0 whether or not the goals are met; non-zero only when something failed.
#
# Knobs (environment): BIN (server binary), PROBE_BIN (build/probe), ENGINES ("sqlite
# postgres"), IDLE_WAIT (60 s to wait for an idle CPU), DURATION (10), WARMUP (3), FLOOD (30),
# FLOOD_LEAD (3), PROBE (10) and CHECKED (5) in seconds, ROUNDS (3), RESULTS (bench/results), AUTOGROUP (bench/lib.sh);
# BCRYPT_THREADS, BCRYPT_QUEUE and DB_POOL_SIZE are passed to the server when set, and so is
# every VAR=value word of SERVER_ENV. At the defaults a run takes about 7.5 min (step 3's
# seeding and four reads about 1 min of it per engine).
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
FLOOD=${FLOOD:-30}
FLOOD_LEAD=${FLOOD_LEAD:-3}
PROBE=${PROBE:-10}
CHECKED=${CHECKED:-5}
ROUNDS=${ROUNDS:-3}
PROBE_BIN=${PROBE_BIN:-$ROOT/build/probe}
CONNS=64
THREADS=2
FLOOD_CONNS=32
PROBE_CONNS=4
RESULTS=${RESULTS:-$BENCH/results}
# The latency probes run at nice -10 when this script is root, so the load generator, which
# shares the two cores with the server, its database and the flood, is not descheduled
# behind them (docs/performance-history.md, finding 3); PROBE_NICE= (empty) measures without.
PROBE_NICE=${PROBE_NICE-$([ "$(id -u)" = 0 ] && echo -10)}

for tool in wrk nginx "$PY"; do command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh bench)"; done
[ -x "$PROBE_BIN" ] || die "$PROBE_BIN not built (make build/probe)"
((FLOOD_LEAD + 2 * PROBE + CHECKED + 2 <= FLOOD)) || die "FLOOD must cover FLOOD_LEAD + 2*PROBE + CHECKED + 2 s"

bench_engine() {
  local engine=$1 url
  log "== $engine"
  if [ "$engine" = postgres ]; then
    start_pg
    url=$PG_URL
  else
    url="sqlite:$TMP/srv-sqlite/data/marketplace.db"
  fi
  start_service "$engine" "$url"
  local base="http://127.0.0.1:$SRV_PORT"
  local email="bench-$engine-$RANDOM$RANDOM@example.com" password="bench-password-12"
  local token
  token=$(register "$base" "$email" "$password")
  check_me "$base" "$token"
  local auth="Authorization: Bearer $token"

  # Either server's rate moves by a third from one wrk run to the next (nginx: 67k or 101k,
  # with how its two workers happen to share the 64 connections), so the two alternate over
  # ROUNDS runs each and the ratio is that of the means.
  log "1. nginx static 200 vs GET /health, $ROUNDS rounds alternating (-t$THREADS -c$CONNS -d${DURATION}s)"
  local round
  for ((round = 1; round <= ROUNDS; round++)); do
    CPU_PIDS="$NGINX_PID $(pgrep -P "$NGINX_PID" | paste -sd' ' -)" ROUND=$round \
      measure "$engine" nginx_static "$THREADS" "$CONNS" "http://127.0.0.1:$NGINX_PORT/"
    ROUND=$round measure "$engine" health "$THREADS" "$CONNS" "$base/health"
  done

  log "2. GET /users/me (-t$THREADS -c$CONNS -d${DURATION}s)"
  measure "$engine" users_me "$THREADS" "$CONNS" "$base/users/me" -H "$auth"

  log "3. reads against /health: seeding through the API"
  local reads=$TMP/reads-$engine.txt line scenario path offset_read reader_auth
  "$PY" "$BENCH/seed_reads.py" "$base" "$reads"
  reader_auth="Authorization: Bearer $(head -1 "$reads")"
  local -a read_lines
  mapfile -t read_lines < <(tail -n +2 "$reads")
  for line in "${read_lines[@]}"; do
    read -r scenario path <<<"$line"
    log "3. GET $path (-t$THREADS -c$CONNS -d${DURATION}s)"
    wait_quiet_log # the lines of what came before (the seeding's, the last read's) are all written
    offset_read=$(stat -c %s "$SRV_LOG")
    measure "$engine" "$scenario" "$THREADS" "$CONNS" "$base$path" -H "$reader_auth"
    # every answer's status, warm-up included, from the server's own access log (wrk counts
    # only those >= 400, and only in the measured run)
    wait_quiet_log
    tail -c +"$((offset_read + 1))" "$SRV_LOG" | LC_ALL=C grep -o '"route":"[^"]*","status":[0-9]*' |
      awk -F'"status":' -v e="$engine" -v s="$scenario" '{ n[$2]++ } END { for (c in n) printf "%s\t%s\t%s\t%s\n", e, s, c, n[c] }' \
      >>"$TMP/read_statuses.tsv" || true
    log "  server log, answers: $(awk -v e="$engine" -v s="$scenario" '$1 == e && $2 == s { printf "%s=%s ", $3, $4 }' "$TMP/read_statuses.tsv")"
  done

  log "4. quiet baselines for the flood probes (-t1 -c$PROBE_CONNS -d${DURATION}s)"
  WRK_NICE=$PROBE_NICE measure "$engine" health_c4_quiet 1 "$PROBE_CONNS" "$base/health"
  WRK_NICE=$PROBE_NICE measure "$engine" users_me_c4_quiet 1 "$PROBE_CONNS" "$base/users/me" -H "$auth"

  log "4. login flood: $FLOOD_CONNS connections for ${FLOOD}s, BCRYPT_COST=12; probes from ${FLOOD_LEAD}s in"
  local offset flood_pid
  offset=$(stat -c %s "$SRV_LOG")
  BENCH_EMAIL=$email BENCH_PASSWORD=$password timeout -k 5 $((FLOOD + 30)) \
    wrk -t"$THREADS" -c"$FLOOD_CONNS" -d"${FLOOD}s" --timeout 10s --latency -s "$BENCH/login.lua" "$base/auth/login" \
    >"$RAW/$engine-login_flood.txt" 2>&1 &
  flood_pid=$!
  track_pid "$flood_pid"
  sleep "$FLOOD_LEAD"
  kill -0 "$flood_pid" 2>/dev/null || die_with "$RAW/$engine-login_flood.txt" "the login flood ended early"
  WRK_NICE=$PROBE_NICE wrk_run "$engine-health_c4_flood" 1 "$PROBE_CONNS" "$PROBE" "$base/health" --latency -s "$BENCH/stats.lua"
  WRK_NICE=$PROBE_NICE wrk_run "$engine-users_me_c4_flood" 1 "$PROBE_CONNS" "$PROBE" "$base/users/me" -H "$auth" --latency -s "$BENCH/stats.lua"
  WRK_NICE=$PROBE_NICE bounded "$engine-users_me_c4_flood_checked" "$CHECKED" \
    "$PROBE_BIN" -c"$PROBE_CONNS" -d"$CHECKED" -H "$auth" "$base/users/me"
  local rc=0
  wait "$flood_pid" || rc=$?
  forget_pid "$flood_pid"
  [ "$rc" = 0 ] || die_with "$RAW/$engine-login_flood.txt" "login flood wrk failed ($rc)"
  record "$engine" login_flood "$THREADS" "$FLOOD_CONNS" "$RAW/$engine-login_flood.txt"
  record "$engine" health_c4_flood 1 "$PROBE_CONNS" "$RAW/$engine-health_c4_flood.txt"
  record "$engine" users_me_c4_flood 1 "$PROBE_CONNS" "$RAW/$engine-users_me_c4_flood.txt"
  record "$engine" users_me_c4_flood_checked "$PROBE_CONNS" "$PROBE_CONNS" "$RAW/$engine-users_me_c4_flood_checked.txt"

  # cross-check the flood's answers from the server's own access log
  wait_quiet_log
  local route
  for route in /health /users/me; do # the flood sends neither: these lines are the probes'
    printf '%s\t%s\t%s\n' "$engine" "$route" "$(server_latency "$SRV_LOG" "$offset" "$route")" >>"$TMP/server_latency.tsv"
  done
  log "  server-side p50/p99 ms during the flood: $(awk -v e="$engine" '$1 == e { printf "%s %s/%s  ", $2, $3, $4 }' "$TMP/server_latency.tsv")"
  tail -c +"$((offset + 1))" "$SRV_LOG" | grep '"route":"/auth/login"' |
    sed -n 's/.*"status":\([0-9]*\).*/\1/p' | sort | uniq -c |
    awk -v e="$engine" '{ printf "%s\t%s\t%s\n", e, $2, $1 }' >>"$TMP/login_log_counts.tsv"
  log "  server log, /auth/login answers: $(awk -v e="$engine" '$1 == e { printf "%s=%s ", $2, $3 }' "$TMP/login_log_counts.tsv")"

  stop_pid "$SRV_PID"
  [ "$engine" = postgres ] && stop_pg
  return 0
}

# ------------------------------------------------------------------ main

: >"$TMP/login_log_counts.tsv"
: >"$TMP/server_latency.tsv"
: >"$TMP/read_statuses.tsv"
begin_run
start_nginx
each_engine
stop_pid "$NGINX_PID"

# ------------------------------------------------------------------ results

mkdir -p "$RESULTS"
cp "$TMP/login_log_counts.tsv" "$RESULTS/login_log_counts.tsv"
cp "$TMP/server_latency.tsv" "$RESULTS/server_latency.tsv"
cp "$TMP/read_statuses.tsv" "$RESULTS/read_statuses.tsv"
write_results "$RESULTS" "$BENCH/summarize.py" \
  "settings: DURATION=${DURATION}s WARMUP=${WARMUP}s FLOOD=${FLOOD}s FLOOD_LEAD=${FLOOD_LEAD}s PROBE=${PROBE}s CHECKED=${CHECKED}s ROUNDS=${ROUNDS}"
