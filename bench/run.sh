#!/usr/bin/env bash
# Benchmark suite (`make bench`); docs/performance.md explains what it measures and why.
#
# In one run, on loopback only, with every load bounded by wrk's -d (and `timeout` around it):
#   1. nginx returning a static 200 vs the service's GET /health (wrk -t2 -c64 -d10s);
#   2. GET /users/me with a valid token (same settings): the baseline later work compares to;
#   3. a login flood at BCRYPT_COST=12 (32 connections, 30 s) with GET /health and then
#      GET /users/me probed during it (wrk -t1 -c4 -d10s), compared with the same probes on
#      the quiet server just before.
# Steps 1-3 run on SQLite and on PostgreSQL (a private throwaway cluster). Everything this
# script starts (nginx, the servers, the cluster, background wrk) and its temp dir are
# removed on exit, also on failure, Ctrl-C or SIGTERM (and by a watchdog on SIGKILL).
#
# Output: wrk's reports in bench/results/raw/, one row per measurement in
# bench/results/latest.tsv, and the summary table (also printed) in bench/results/latest.txt.
# Exits 0 whether or not the goals are met; non-zero only when something failed.
#
# Knobs (environment): BIN (server binary), ENGINES ("sqlite postgres"), IDLE_WAIT (60 s to
# wait for an idle CPU), DURATION (10), WARMUP (3), FLOOD (30), FLOOD_LEAD (3) and PROBE (10)
# in seconds, RESULTS (bench/results);
# BCRYPT_THREADS, BCRYPT_QUEUE and DB_POOL_SIZE are passed to the server when set, and so is
# every VAR=value word of SERVER_ENV.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
BIN=${BIN:-$ROOT/build/marketplace}
ENGINES=${ENGINES:-sqlite postgres}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
FLOOD=${FLOOD:-30}
FLOOD_LEAD=${FLOOD_LEAD:-3}
PROBE=${PROBE:-10}
CONNS=64
THREADS=2
FLOOD_CONNS=32
PROBE_CONNS=4
RESULTS=${RESULTS:-$BENCH/results}
PY=/usr/bin/python3

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
die_with() { cat "$1" >&2 2>/dev/null || true; shift; die "$@"; } # file message: shows file, fails

for tool in wrk nginx "$PY"; do command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh bench)"; done
[ -x "$BIN" ] || die "$BIN not built (make build/marketplace)"
((FLOOD_LEAD + 2 * PROBE + 2 <= FLOOD)) || die "FLOOD must cover FLOOD_LEAD + 2*PROBE + 2 s"

# ------------------------------------------------------------------ clean-up

TMP=$(mktemp -d /tmp/mp-bench.XXXXXX)
chmod 755 "$TMP" # the postgres user must reach its cluster directory inside
PIDS=()          # every background process started here (also listed in $TMP/pids)
PG_DATA=""       # set once the cluster exists
PG_BIN=""
WATCHDOG=""      # pid of the watchdog below

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

track_pid() {
  PIDS+=("$1")
  echo "$1" >>"$TMP/pids"
}

forget_pid() {
  local keep=() p
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
  printf '%s\n' "${PIDS[@]}" >"$TMP/pids"
}

stop_pid() { # pid: SIGTERM, up to 15 s, then SIGKILL; reaps it and forgets it
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  forget_pid "$pid"
}

stop_pg() {
  [ -n "$PG_DATA" ] || return 0
  if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w stop >/dev/null 2>&1; then
    # pg_ctl could not do it: end the postmaster named in its pid file
    local pm
    pm=$(head -1 "$PG_DATA/postmaster.pid" 2>/dev/null || true)
    if [ -n "$pm" ]; then kill -KILL "$pm" 2>/dev/null || true; fi
  fi
  PG_DATA=""
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  stop_pg
  rm -rf "$TMP"
  kill "$WATCHDOG" 2>/dev/null || true
  [ "$rc" = 0 ] || log "failed (exit $rc); everything started was stopped"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A trap cannot run on SIGKILL: then a watchdog in its own session ends what is left (the
# processes listed in $TMP/pids, if they are still ours, and the cluster, which pg_ctl
# detaches) and removes the temp dir. After a normal exit it finds nothing to do.
# shellcheck disable=SC2016 # the script is for the inner bash
setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done
  [ -d "$2" ] || exit 0
  while read -r p; do
    if [ -n "$p" ] && grep -qaE "$2|wrk" "/proc/$p/cmdline" 2>/dev/null; then pkill -KILL -P "$p"; kill -KILL "$p"; fi
  done <"$2/pids" 2>/dev/null
  [ -f "$2/pg/data/postmaster.pid" ] && kill -QUIT "$(head -1 "$2/pg/data/postmaster.pid")" 2>/dev/null && sleep 2
  rm -rf "$2"' watchdog "$$" "$TMP" </dev/null >/dev/null 2>&1 &
WATCHDOG=$!

cp "$BIN" "$TMP/marketplace" # one binary for the whole run, even if the tree is rebuilt meanwhile
SRV_BIN=$TMP/marketplace

# ------------------------------------------------------------------ helpers

cpu_idle_pct() { # share of CPU time idle over 1 s: other load on the machine skews everything
  local a b
  read -ra a </proc/stat
  sleep 1
  read -ra b </proc/stat
  local idle=$((b[4] + b[5] - a[4] - a[5])) total=0 i
  for ((i = 1; i < ${#a[@]}; i++)); do total=$((total + b[i] - a[i])); done
  echo $((total > 0 ? 100 * idle / total : 0))
}

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_http() { # url pid: waits up to 30 s for a 200 while pid lives
  "$PY" - "$1" "$2" <<'EOF'
import os, sys, time, urllib.request
url, pid = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 30
while time.time() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(f"process {pid} exited before {url} answered")
    try:
        if urllib.request.urlopen(url, timeout=1).status == 200:
            sys.exit(0)
    except Exception:
        pass
    time.sleep(0.05)
sys.exit(f"{url} did not answer 200 within 30 s")
EOF
}

register() { # base_url email password: prints the token
  "$PY" - "$@" <<'EOF'
import json, sys, urllib.request
base, email, password = sys.argv[1:4]
body = json.dumps({"email": email, "password": password, "name": "Bench User",
                   "address": "1 Main St", "zip": "10001"}).encode()
req = urllib.request.Request(base + "/auth/register", data=body, method="POST",
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=30) as r:
    assert r.status == 201, r.status
    print(json.load(r)["token"])
EOF
}

check_me() { # base_url token: fails unless /users/me answers 200
  "$PY" - "$@" <<'EOF'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/users/me", headers={"Authorization": "Bearer " + sys.argv[2]})
with urllib.request.urlopen(req, timeout=10) as r:
    assert r.status == 200, r.status
EOF
}

TSV=$TMP/results.tsv
printf 'engine\tscenario\tthreads\tconns\tduration_s\trequests\trps\tp50_ms\tp99_ms\tmax_ms\tnon2xx\tsocket_errors\tstatuses\n' >"$TSV"

field() { # name line -> value of name=value in line (empty when absent)
  sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"
}

# record engine scenario threads conns rawfile: turns the BENCH line of a wrk report into a row
record() {
  local engine=$1 scenario=$2 threads=$3 conns=$4 raw=$5 line statuses sockerr
  line=$(grep '^BENCH ' "$raw" | tail -1) || die_with "$raw" "no BENCH line in $raw"
  statuses=$(grep -o 'status_[0-9]*=[0-9]*' <<<"$line" | sed 's/status_//' | paste -sd, - || true)
  sockerr=$(($(field connect_err "$line") + $(field read_err "$line") + $(field write_err "$line") + $(field timeouts "$line")))
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$engine" "$scenario" "$threads" "$conns" \
    "$(field duration_s "$line")" "$(field requests "$line")" "$(field rps "$line")" "$(field p50_ms "$line")" \
    "$(field p99_ms "$line")" "$(field max_ms "$line")" "$(field non2xx "$line")" "$sockerr" "${statuses:--}" >>"$TSV"
  log "  $scenario: $(field rps "$line") req/s, p99 $(field p99_ms "$line") ms, non-2xx $(field non2xx "$line"), socket errors $sockerr${statuses:+, statuses $statuses}"
}

RAW=$TMP/raw
mkdir -p "$RAW"

# wrk_run rawname threads conns seconds url [extra wrk args...]: one bounded wrk run
wrk_run() {
  local name=$1 threads=$2 conns=$3 secs=$4 url=$5
  shift 5
  # in the background and waited for, so that a signal runs the clean-up at once
  timeout -k 5 $((secs + 30)) wrk -t"$threads" -c"$conns" -d"${secs}s" --timeout 5s "$@" "$url" >"$RAW/$name.txt" 2>&1 &
  local pid=$! rc=0
  track_pid "$pid"
  wait "$pid" || rc=$?
  forget_pid "$pid"
  [ "$rc" = 0 ] || die_with "$RAW/$name.txt" "wrk failed ($name, exit $rc)"
}

# measure engine scenario threads conns url [extra wrk args...]: warm-up, then the measurement
measure() {
  local engine=$1 scenario=$2 threads=$3 conns=$4 url=$5
  shift 5
  wrk_run "$engine-$scenario-warmup" "$threads" "$conns" "$WARMUP" "$url" "$@"
  wrk_run "$engine-$scenario" "$threads" "$conns" "$DURATION" "$url" --latency -s "$BENCH/stats.lua" "$@"
  record "$engine" "$scenario" "$threads" "$conns" "$RAW/$engine-$scenario.txt"
}

# ------------------------------------------------------------------ nginx

start_nginx() {
  local d=$TMP/nginx
  mkdir -p "$d/tmp"
  NGINX_PORT=$(free_port)
  cat >"$d/nginx.conf" <<EOF
# the reference: a static 200 with the same body as GET /health
worker_processes $(nproc);
daemon off;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;   # like the service, never close a busy keep-alive connection
  client_body_temp_path $d/tmp/body;
  proxy_temp_path $d/tmp/proxy;
  fastcgi_temp_path $d/tmp/fastcgi;
  uwsgi_temp_path $d/tmp/uwsgi;
  scgi_temp_path $d/tmp/scgi;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    default_type application/json;
    location / { return 200 '{"status":"ok"}'; }
  }
}
EOF
  nginx -e "$d/error.log" -p "$d" -c "$d/nginx.conf" >"$d/stdout.log" 2>&1 &
  NGINX_PID=$!
  track_pid "$NGINX_PID"
  wait_http "http://127.0.0.1:$NGINX_PORT/" "$NGINX_PID" || die "nginx did not start: $(cat "$d/error.log" "$d/stdout.log")"
}

# ------------------------------------------------------------------ PostgreSQL

start_pg() {
  local bins
  bins=$(printf '%s\n' /usr/lib/postgresql/*/bin | grep -v '\*' | sort -V | tail -1 || true)
  [ -n "$bins" ] || die "PostgreSQL server binaries not found (scripts/deps.sh test installs them)"
  PG_BIN=$bins
  local d=$TMP/pg
  mkdir -p "$d"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$d"
  PG_PORT=$(free_port)
  as_pg "$PG_BIN/initdb" -D "$d/data" -A trust -U postgres --no-sync >/dev/null
  PG_DATA=$d/data
  as_pg "$PG_BIN/pg_ctl" -D "$d/data" -l "$d/log" -w start -o "-p $PG_PORT -k $d -c listen_addresses=127.0.0.1 \
-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" >/dev/null
  as_pg "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres mp_bench
  PG_URL="postgres://postgres@127.0.0.1:$PG_PORT/mp_bench"
}

# ------------------------------------------------------------------ the service

start_service() { # engine database_url
  local engine=$1 url=$2 d=$TMP/srv-$1
  mkdir -p "$d/data"
  SRV_PORT=$(free_port)
  SRV_LOG=$d/server.log
  local extra=() v
  for v in BCRYPT_THREADS BCRYPT_QUEUE DB_POOL_SIZE; do [ -n "${!v:-}" ] && extra+=("$v=${!v}"); done
  # shellcheck disable=SC2206 # SERVER_ENV is a list of VAR=value words
  [ -n "${SERVER_ENV:-}" ] && extra+=($SERVER_ENV)
  env -i PATH="$PATH" APP_ENV=production JWT_SECRET="$JWT_SECRET" PORT="$SRV_PORT" BIND=127.0.0.1 \
    DATA_DIR="$d/data" DATABASE_URL="$url" BCRYPT_COST=12 "${extra[@]}" "$SRV_BIN" serve >/dev/null 2>"$SRV_LOG" &
  SRV_PID=$!
  track_pid "$SRV_PID"
  wait_http "http://127.0.0.1:$SRV_PORT/health" "$SRV_PID" || die "the service did not start: $(tail -5 "$SRV_LOG")"
}

# waits until the server log stops growing for 1 s (queued logins finished), at most 15 s
wait_quiet_log() {
  local last=-1 size i
  for ((i = 0; i < 30; i++)); do
    size=$(stat -c %s "$SRV_LOG")
    [ "$size" = "$last" ] && return 0
    last=$size
    sleep 0.5
  done
}

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

  log "1. nginx static 200 vs GET /health (-t$THREADS -c$CONNS -d${DURATION}s)"
  measure "$engine" nginx_static "$THREADS" "$CONNS" "http://127.0.0.1:$NGINX_PORT/"
  measure "$engine" health "$THREADS" "$CONNS" "$base/health"

  log "2. GET /users/me (-t$THREADS -c$CONNS -d${DURATION}s)"
  measure "$engine" users_me "$THREADS" "$CONNS" "$base/users/me" -H "$auth"

  log "3. quiet baselines for the flood probes (-t1 -c$PROBE_CONNS -d${DURATION}s)"
  measure "$engine" health_c4_quiet 1 "$PROBE_CONNS" "$base/health"
  measure "$engine" users_me_c4_quiet 1 "$PROBE_CONNS" "$base/users/me" -H "$auth"

  log "3. login flood: $FLOOD_CONNS connections for ${FLOOD}s, BCRYPT_COST=12; probes from ${FLOOD_LEAD}s in"
  local offset flood_pid
  offset=$(stat -c %s "$SRV_LOG")
  BENCH_EMAIL=$email BENCH_PASSWORD=$password timeout -k 5 $((FLOOD + 30)) \
    wrk -t"$THREADS" -c"$FLOOD_CONNS" -d"${FLOOD}s" --timeout 10s --latency -s "$BENCH/login.lua" "$base/auth/login" \
    >"$RAW/$engine-login_flood.txt" 2>&1 &
  flood_pid=$!
  track_pid "$flood_pid"
  sleep "$FLOOD_LEAD"
  kill -0 "$flood_pid" 2>/dev/null || die_with "$RAW/$engine-login_flood.txt" "the login flood ended early"
  wrk_run "$engine-health_c4_flood" 1 "$PROBE_CONNS" "$PROBE" "$base/health" --latency -s "$BENCH/stats.lua"
  wrk_run "$engine-users_me_c4_flood" 1 "$PROBE_CONNS" "$PROBE" "$base/users/me" -H "$auth" --latency -s "$BENCH/stats.lua"
  local rc=0
  wait "$flood_pid" || rc=$?
  forget_pid "$flood_pid"
  [ "$rc" = 0 ] || die_with "$RAW/$engine-login_flood.txt" "login flood wrk failed ($rc)"
  record "$engine" login_flood "$THREADS" "$FLOOD_CONNS" "$RAW/$engine-login_flood.txt"
  record "$engine" health_c4_flood 1 "$PROBE_CONNS" "$RAW/$engine-health_c4_flood.txt"
  record "$engine" users_me_c4_flood 1 "$PROBE_CONNS" "$RAW/$engine-users_me_c4_flood.txt"

  # cross-check the flood's answers from the server's own access log
  wait_quiet_log
  tail -c +"$((offset + 1))" "$SRV_LOG" | grep '"route":"/auth/login"' |
    sed -n 's/.*"status":\([0-9]*\).*/\1/p' | sort | uniq -c |
    awk -v e="$engine" '{ printf "%s\t%s\t%s\n", e, $2, $1 }' >>"$TMP/login_log_counts.tsv"
  log "  server log, /auth/login answers: $(awk -v e="$engine" '$1 == e { printf "%s=%s ", $2, $3 }' "$TMP/login_log_counts.tsv")"

  stop_pid "$SRV_PID"
  [ "$engine" = postgres ] && stop_pg
  return 0
}

# ------------------------------------------------------------------ main

JWT_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
: >"$TMP/login_log_counts.tsv"
log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
# other load on the machine skews every number: wait up to IDLE_WAIT s for it to be idle
IDLE_BEFORE=$(cpu_idle_pct)
for ((waited = 1; IDLE_BEFORE < 90 && waited < ${IDLE_WAIT:-60}; waited++)); do IDLE_BEFORE=$(cpu_idle_pct); done
log "CPU idle before the run: $IDLE_BEFORE% (well below 100 means other load skews the numbers)"
start_nginx
for engine in $ENGINES; do
  case $engine in sqlite | postgres) bench_engine "$engine" ;; *) die "unknown engine $engine" ;; esac
done
stop_pid "$NGINX_PID"

# ------------------------------------------------------------------ results

mkdir -p "$RESULTS"
rm -rf "$RESULTS/raw"
cp -r "$RAW" "$RESULTS/raw"
cp "$TSV" "$RESULTS/latest.tsv"
cp "$TMP/login_log_counts.tsv" "$RESULTS/login_log_counts.tsv"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cores: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "kernel: $(uname -r)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- src 2>/dev/null || echo ' (src modified)')"
  echo "wrk: $(wrk --version 2>&1 | head -1 | awk '{print $2}')"
  echo "nginx: $(nginx -v 2>&1 | sed 's/.*nginx\///')"
  echo "postgres: $([ -n "$PG_BIN" ] && "$PG_BIN/postgres" --version | awk '{print $3}' || echo -)"
  echo "sqlite: $(pkg-config --modversion sqlite3 2>/dev/null || echo unknown)"
  echo "idle before run: $IDLE_BEFORE%"
  echo "idle after run: $(cpu_idle_pct)%"
  echo "settings: DURATION=${DURATION}s WARMUP=${WARMUP}s FLOOD=${FLOOD}s FLOOD_LEAD=${FLOOD_LEAD}s PROBE=${PROBE}s"
} >"$RESULTS/machine.txt"
"$PY" "$BENCH/summarize.py" "$RESULTS" | tee "$RESULTS/latest.txt"
log "results in $RESULTS (latest.txt, latest.tsv, raw/)"
