# Shared by the benchmark scripts (bench/run.sh, bench/jobs.sh): clean-up of everything a
# run starts (a trap, plus a watchdog for SIGKILL), wrk runs bounded by `timeout`, one TSV row
# per measurement, and starting nginx, a private PostgreSQL cluster and the service.
# Sets the knobs both scripts share (BIN, ENGINES, DURATION, WARMUP) and ROOT, BENCH, PY.
# PG_OPTS: more `-c name=value` settings for the private PostgreSQL cluster (to profile it:
# "-c shared_preload_libraries=pg_stat_statements,auto_explain -c auto_explain.log_min_duration=3").
# PGSTAT=1: the cluster keeps pg_stat_statements, and each profiled measurement (profile_start,
# profile_finish) writes PostgreSQL's statements by time spent in it to <out>.statements.txt.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
BIN=${BIN:-$ROOT/build/marketplace}
ENGINES=${ENGINES:-sqlite postgres}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
PY=/usr/bin/python3
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg) # the machine's load average (1, 5, 15 min) as the run starts

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
die_with() { cat "$1" >&2 2>/dev/null || true; shift; die "$@"; } # file message: shows file, fails

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
  # what a script set up beyond processes (bench/remote.sh: its network namespace)
  if declare -F extra_cleanup >/dev/null; then extra_cleanup || true; fi
  # the scheduler setting changed below, if it was
  if [ -f "$TMP/autogroup_restore" ]; then echo 1 >/proc/sys/kernel/sched_autogroup_enabled; fi
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
  [ -f "$2/autogroup_restore" ] && echo 1 >/proc/sys/kernel/sched_autogroup_enabled
  rm -rf "$2"' watchdog "$$" "$TMP" </dev/null >/dev/null 2>&1 &
WATCHDOG=$!

# ------------------------------------------------------------------ the scheduler

# The load generators here stand in for clients on other machines, and the probes run at nice
# -10 and the password hashing at nice 10 so that the kernel ranks them accordingly. With
# autogroup on, the kernel first splits the CPU between sessions and applies nice values only
# within one, so neither ranks against the flood's wrk or PostgreSQL, and a runnable
# PostgreSQL backend was measured waiting 6 s for a CPU (docs/performance-history.md,
# finding 6). A run as root turns it off and restores it on exit (also after SIGKILL, by the
# watchdog); AUTOGROUP=keep leaves it as it is.
AUTOGROUP_FILE=/proc/sys/kernel/sched_autogroup_enabled
if [ "${AUTOGROUP:-off}" = off ] && [ -w "$AUTOGROUP_FILE" ] && [ "$(cat "$AUTOGROUP_FILE")" = 1 ]; then
  touch "$TMP/autogroup_restore"
  echo 0 >"$AUTOGROUP_FILE"
fi

[ -x "$BIN" ] || die "$BIN not built (make build/marketplace)"
# one binary for the whole run, even if the tree is rebuilt meanwhile, with its media library
cp "$BIN" "$TMP/marketplace" && cp "$(dirname "$BIN")/marketplace-media.so" "$TMP/"
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
printf 'engine\tscenario\tthreads\tconns\tduration_s\trequests\trps\tmean_ms\tp50_ms\tp99_ms\tmax_ms\tnon2xx\tsocket_errors\tstatuses\tcpu_us_per_req\n' >"$TSV"
CLK_TCK=$(getconf CLK_TCK)

field() { # name line -> value of name=value in line (empty when absent)
  sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"
}

# record engine scenario threads conns rawfile [cpu_ticks]: turns the BENCH line of a wrk report
# into a row; cpu_ticks (the served processes' CPU over that run, cpu_wrk_run's CPU_TICKS)
# gives the row's CPU time per request, in microseconds ("-" without it)
record() {
  local engine=$1 scenario=$2 threads=$3 conns=$4 raw=$5 ticks=${6:-} line statuses sockerr cpu=-
  line=$(grep '^BENCH ' "$raw" | tail -1) || die_with "$raw" "no BENCH line in $raw"
  statuses=$(grep -o 'status_[0-9]*=[0-9]*' <<<"$line" | sed 's/status_//' | paste -sd, - || true)
  sockerr=$(($(field connect_err "$line") + $(field read_err "$line") + $(field write_err "$line") + $(field timeouts "$line")))
  if [ -n "$ticks" ] && [ "$(field requests "$line")" -gt 0 ]; then
    cpu=$(awk -v t="$ticks" -v hz="$CLK_TCK" -v n="$(field requests "$line")" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$engine" "$scenario" "$threads" "$conns" \
    "$(field duration_s "$line")" "$(field requests "$line")" "$(field rps "$line")" "$(field mean_ms "$line")" \
    "$(field p50_ms "$line")" "$(field p99_ms "$line")" "$(field max_ms "$line")" "$(field non2xx "$line")" "$sockerr" \
    "${statuses:--}" "$cpu" >>"$TSV"
  log "  $scenario: $(field rps "$line") req/s, p99 $(field p99_ms "$line") ms, CPU $cpu us/req, non-2xx $(field non2xx "$line"), socket errors $sockerr${statuses:+, statuses $statuses}"
}

RAW=$TMP/raw
mkdir -p "$RAW"

# bounded rawname seconds command...: runs command for at most seconds + 30 s, at WRK_NICE
# when set (e.g. -10, root only; see docs/performance.md), its output in raw/rawname.txt; in
# the background and waited for, so that a signal runs the clean-up at once
bounded() {
  local name=$1 secs=$2
  shift 2
  timeout -k 5 $((secs + 30)) ${WRK_NICE:+nice -n "$WRK_NICE"} "$@" >"$RAW/$name.txt" 2>&1 &
  local pid=$! rc=0
  track_pid "$pid"
  wait "$pid" || rc=$?
  forget_pid "$pid"
  [ "$rc" = 0 ] || die_with "$RAW/$name.txt" "$(basename "$1") failed ($name, exit $rc)"
}

# wrk_run rawname threads conns seconds url [extra wrk args...]: one bounded wrk run, on the
# cores WRK_CPUS names when set (taskset; bench/cores.sh keeps wrk off the server's core)
wrk_run() {
  local name=$1 threads=$2 conns=$3 secs=$4 url=$5
  shift 5
  bounded "$name" "$secs" ${WRK_CPUS:+taskset -c "$WRK_CPUS"} wrk -t"$threads" -c"$conns" -d"${secs}s" --timeout 5s \
    "$@" "$url"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # a process's user + system CPU, in clock ticks

# served_ticks: the CPU ticks (user + system) of the processes that answer the measured
# requests: CPU_PIDS when set (nginx's workers, the Node peer's processes), else the service
served_ticks() {
  local sum=0 p
  for p in ${CPU_PIDS:-$SRV_PID}; do sum=$((sum + $(cpu_ticks "$p" 2>/dev/null || echo 0))); done
  echo "$sum"
}

# cpu_wrk_run: wrk_run's arguments; the served processes' CPU ticks over the run in CPU_TICKS
# (for record's cpu_ticks: CPU time per request, the figure that moves least with the machine)
cpu_wrk_run() {
  local before
  before=$(served_ticks)
  wrk_run "$@"
  CPU_TICKS=$(($(served_ticks) - before))
}

# measure engine scenario threads conns url [extra wrk args...]: warm-up, then the measurement
# (ROUND=n names the raw reports of one of several rounds of the same scenario), with the
# served processes' CPU time per request (CPU_PIDS, served_ticks)
measure() {
  local engine=$1 scenario=$2 threads=$3 conns=$4 url=$5 raw=$1-$2${ROUND:+-r$ROUND}
  shift 5
  wrk_run "$raw-warmup" "$threads" "$conns" "$WARMUP" "$url" "$@"
  cpu_wrk_run "$raw" "$threads" "$conns" "$DURATION" "$url" --latency -s "$BENCH/stats.lua" "$@"
  record "$engine" "$scenario" "$threads" "$conns" "$RAW/$raw.txt" "$CPU_TICKS"
}

# quote_pairs files: how many (provider, job) pairs bench/quotes.lua can quote from files
# (seed_to's quoters.tokens and open.jobs), each once
quote_pairs() { echo $(($(wc -l <"$1/quoters.tokens") * $(wc -l <"$1/open.jobs"))); }

# PostgreSQL: the statistics autovacuum would keep, before a measurement (STATS=settled, the
# default; asis: none). A table a run grew from empty in the warm-up (payments, messages, the
# simulated processor's objects) otherwise keeps the plans its connections made while it was
# nearly empty, sequential scans, until autovacuum's next pass (up to a minute):
# performance-history.md, section 22.
settle_stats() {
  [ "$1" = postgres ] && [ "${STATS:-settled}" = settled ] || return 0
  psql -q "$PG_URL" -c "ANALYZE" >/dev/null
}

# measure_quotes engine scenario raw base files warm_from from: POST /quotes at -t2 -c64
# (bench/quotes.lua, every request a new pair), the warm-up from pair warm_from and the
# measurement from pair from (disjoint: a repeated pair answers 409), with its CPU per request
measure_quotes() {
  local engine=$1 scenario=$2 raw=$3 base=$4 files=$5
  BENCH_TOKENS=$files/quoters.tokens BENCH_JOBS=$files/open.jobs BENCH_THREADS=2 BENCH_START=$6 \
    wrk_run "$raw-warmup" 2 64 "$WARMUP" "$base" -s "$BENCH/quotes.lua"
  settle_stats "$engine"
  profile_start "$RESULTS/profile/$raw" "$DURATION"
  BENCH_TOKENS=$files/quoters.tokens BENCH_JOBS=$files/open.jobs BENCH_THREADS=2 BENCH_START=$7 \
    cpu_wrk_run "$raw" 2 64 "$DURATION" "$base" --latency -s "$BENCH/quotes.lua"
  profile_finish
  record "$engine" "$scenario" 2 64 "$RAW/$raw.txt" "$CPU_TICKS"
}

# server_latency logfile from_byte route: "p50 p99" (ms) of the access-log lines of route
# written from byte from_byte on: the same requests as seen by the server, from the first
# callback to the last byte sent, without the client's own scheduling delays
server_latency() {
  tail -c +"$(($2 + 1))" "$1" | "$PY" -c '
import json, sys
ms = sorted(d["ms"] for d in (json.loads(l) for l in sys.stdin if l.startswith("{")) if d.get("route") == sys.argv[1])
print(f"{ms[len(ms) // 2]:.3f} {ms[min(len(ms) - 1, len(ms) * 99 // 100)]:.3f}" if ms else "- -")' "$3"
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
  setsid nginx -e "$d/error.log" -p "$d" -c "$d/nginx.conf" >"$d/stdout.log" 2>&1 &
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
-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 \
${PGSTAT:+-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all} ${PG_OPTS:-}" >/dev/null
  as_pg "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres mp_bench
  PG_URL="postgres://postgres@127.0.0.1:$PG_PORT/mp_bench"
  if [ "${PGSTAT:-0}" = 1 ]; then psql -q "$PG_URL" -c "CREATE EXTENSION pg_stat_statements" >/dev/null; fi
}

# ------------------------------------------------------------------ the service

# The service runs in a session of its own, as a service manager starts a server, and so does
# nginx: with autogroup on (AUTOGROUP=keep), sessions are what the kernel shares the CPU
# between. setsid does not fork here (a script's background jobs lead no process group), so $!
# is the server's own pid.
start_service() { # engine database_url
  local engine=$1 url=$2 d=$TMP/srv-$1
  mkdir -p "$d/data"
  SRV_PORT=$(free_port)
  SRV_LOG=$d/server.log
  local extra=() v
  for v in BCRYPT_THREADS BCRYPT_QUEUE DB_POOL_SIZE; do [ -n "${!v:-}" ] && extra+=("$v=${!v}"); done
  # shellcheck disable=SC2206 # SERVER_ENV is a list of VAR=value words
  [ -n "${SERVER_ENV:-}" ] && extra+=($SERVER_ENV)
  # every load generator connects from 127.0.0.1: no per-address connection cap
  env -i PATH="$PATH" APP_ENV=production JWT_SECRET="$JWT_SECRET" PORT="$SRV_PORT" BIND=127.0.0.1 \
    DATA_DIR="$d/data" DATABASE_URL="$url" BCRYPT_COST=12 HTTP_MAX_CONNECTIONS_PER_IP=0 "${extra[@]}" \
    setsid "$SRV_BIN" serve >/dev/null 2>"$SRV_LOG" &
  SRV_PID=$!
  track_pid "$SRV_PID"
  wait_http "http://127.0.0.1:$SRV_PORT/health" "$SRV_PID" || die "the service did not start: $(tail -5 "$SRV_LOG")"
}

# start_engine engine: for postgres a private cluster first; then the service on the engine's
# database. Sets DB (the SQLite file, or the PostgreSQL URL) beside SRV_PORT, SRV_PID, SRV_LOG.
start_engine() {
  local engine=$1
  if [ "$engine" = postgres ]; then
    start_pg
    DB=$PG_URL
    start_service "$engine" "$PG_URL"
  else
    DB="$TMP/srv-sqlite/data/marketplace.db"
    start_service "$engine" "sqlite:$DB"
  fi
}

# seed_to engine target: bench/seed_jobs.py's accounts (the first time) and filler jobs up to
# target in $DB, then the tokens and paths the wrk scripts read, in $TMP/files-engine
seed_to() {
  local engine=$1 target=$2 state=$TMP/state-$1.json
  [ -f "$state" ] || "$PY" "$BENCH/seed_jobs.py" init --engine "$engine" --db "$DB" --state "$state"
  "$PY" "$BENCH/seed_jobs.py" grow --engine "$engine" --db "$DB" --state "$state" --target "$target" >/dev/null
  "$PY" "$BENCH/seed_jobs.py" files --state "$state" --secret "$JWT_SECRET" --out "$TMP/files-$engine"
}

# save_cards base files (bench/writes.sh, bench/wal_pages.sh): a saved test card for each customer
# who accepts a quote
save_cards() {
  "$PY" - "$@" <<'EOF'
import http.client, json, sys, urllib.parse
base, files = sys.argv[1:3]
tokens = open(f"{files}/writers.tokens").read().split()
url = urllib.parse.urlparse(base)
conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
for line in open(f"{files}/card.customers"):
    conn.request("POST", "/payments/payment-method", body=json.dumps({"paymentMethodId": "pm_card_visa"}),
                 headers={"Authorization": "Bearer " + tokens[int(line)], "Content-Type": "application/json"})
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit(f"saving a card answered {r.status}: {body[:200]!r}")
EOF
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


# ------------------------------------------------------------------ a run

# begin_run: the JWT secret the run's servers share, then up to IDLE_WAIT s (60) of waiting for
# an idle CPU (other load skews every number); the idle share in IDLE_BEFORE (machine.txt)
begin_run() {
  JWT_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  IDLE_BEFORE=$(cpu_idle_pct)
  local waited
  for ((waited = 1; IDLE_BEFORE < 90 && waited < ${IDLE_WAIT:-60}; waited++)); do IDLE_BEFORE=$(cpu_idle_pct); done
  log "CPU idle before the run: $IDLE_BEFORE% (well below 100 means other load skews the numbers)"
}

# each_engine: the script's bench_engine for each of ENGINES
each_engine() {
  local engine
  for engine in $ENGINES; do
    case $engine in sqlite | postgres) bench_engine "$engine" ;; *) die "unknown engine $engine" ;; esac
  done
}

# ------------------------------------------------------------------ results

# write_results dir summarizer settings_line: copies the raw wrk reports and the TSV into dir,
# records the machine, and prints (and keeps as latest.txt) the summarizer's tables
write_results() {
  local dir=$1 summarizer=$2 settings=$3
  mkdir -p "$dir"
  rm -rf "$dir/raw"
  cp -r "$RAW" "$dir/raw"
  cp "$TSV" "$dir/latest.tsv"
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
    echo "load before run: $LOAD_BEFORE"
    echo "load after run: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "idle before run: $IDLE_BEFORE%"
    echo "idle after run: $(cpu_idle_pct)%"
    echo "sched_autogroup_enabled during the run: $(cat "$AUTOGROUP_FILE" 2>/dev/null || echo -)$([ -f "$TMP/autogroup_restore" ] && echo ' (turned off for the run)')"
    echo "$settings"
  } >"$dir/machine.txt"
  "$PY" "$summarizer" "$dir" | tee "$dir/latest.txt"
  log "results in $dir (latest.txt, latest.tsv, raw/)"
}


perf_tables() { # perf.data out-prefix symbols children: perf's split by object and by symbol, and inclusive times
  perf report -i "$1" --no-children --sort dso --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' |
    awk 'NR <= 12' >"$2.dso.txt"
  perf report -i "$1" --no-children --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' |
    awk -v n="$3" 'NR <= n' >"$2.sym.txt"
  perf report -i "$1" --children --sort sym --stdio -g none 2>/dev/null | grep '\[\.\]' |
    awk -v n="$4" 'NR <= n' >"$2.children.txt"
}

pg_stats() { [ "${PGSTAT:-0}" = 1 ] && [ -n "${PG_DATA:-}" ]; } # PostgreSQL runs and keeps its statements' times

# profile_start out-prefix seconds: for seconds, in the background, with PERF=1 `perf record -g`
# of the server into out-prefix.perf (CALLGRAPH fp or dwarf, PERF_FREQ) and with OFFCPU=1 `perf
# trace -s` of its system calls into out-prefix.trace.txt; with PGSTAT=1 PostgreSQL's statement
# times start from zero. profile_finish waits for them and writes, with PERF=1, perf's tables
# beside them (perf_tables, and the split by thread in out-prefix.threads.txt), with PGSTAT=1
# out-prefix.statements.txt (pg_statements).
profile_start() {
  PROFILE_OUT=$1
  PROFILE_PIDS=()
  if [ "${PERF:-0}" = 1 ] || [ "${OFFCPU:-0}" = 1 ] || pg_stats; then mkdir -p "$(dirname "$1")"; fi
  if [ "${PERF:-0}" = 1 ]; then
    # shellcheck disable=SC2086 # PERF_FREQ's option is two words or none
    perf record -e cpu-clock ${PERF_FREQ:+-F $PERF_FREQ} --call-graph "${CALLGRAPH:-fp}" -p "$SRV_PID" \
      -o "$1.perf" -- sleep "$2" >/dev/null 2>&1 &
    PROFILE_PIDS+=($!)
  fi
  if [ "${OFFCPU:-0}" = 1 ]; then
    perf trace -s -p "$SRV_PID" -o "$1.trace.txt" -- sleep "$2" >/dev/null 2>&1 &
    PROFILE_PIDS+=($!)
  fi
  if pg_stats; then psql -q "$PG_URL" -c "SELECT pg_stat_statements_reset()" >/dev/null; fi
}

# PostgreSQL's statements since profile_start by the time spent in them (planning included),
# with calls, rows and shared blocks dirtied per call
pg_statements() {
  psql -q "$PG_URL" -P pager=off -c "SELECT round((total_exec_time + total_plan_time)::numeric, 1) AS ms, calls,
round(((total_exec_time + total_plan_time) * 1000 / calls)::numeric, 1) AS us_per_call,
round(rows::numeric / calls, 2) AS rows_per_call, round(shared_blks_dirtied::numeric / calls, 2) AS dirtied_per_call,
left(regexp_replace(query, '\s+', ' ', 'g'), 160) AS query
FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 40" >"$1"
}

profile_finish() {
  local pid
  for pid in "${PROFILE_PIDS[@]}"; do wait "$pid" || true; done
  if pg_stats; then pg_statements "$PROFILE_OUT.statements.txt"; fi
  [ "${PERF:-0}" = 1 ] || return 0
  perf_tables "$PROFILE_OUT.perf" "$PROFILE_OUT" 50 60
  perf report -i "$PROFILE_OUT.perf" --no-children --sort comm --stdio -g none 2>/dev/null |
    grep -v '^#' | grep -v '^$' >"$PROFILE_OUT.threads.txt"
}
