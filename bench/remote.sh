#!/usr/bin/env bash
# PostgreSQL as production runs it (`make bench-remote`; docs/performance.md, "PostgreSQL one
# network hop away"): the database in a network namespace of its own, reached over a veth pair
# with RTT_MS of round trip (1 ms by default), and optionally through PgBouncer in transaction
# pooling, beside it in that namespace, as on a database host.
#
# The delay: netem on the veth (`tc qdisc ... netem delay`, RTT_MS/2 each way) where the kernel
# has it; otherwise (this machine's kernel has no sch_netem) build/netdelay, a TCP relay on the
# host that passes every chunk on RTT_MS/2 later in each direction (bench/netdelay.c). The
# summary says which one ran, and the round trip measured with pgbench (`SELECT 1`, one client).
#
# Topologies, each with the service restarted on it (production mode, DB_POOL_SIZE=POOL):
#   loopback   the namespace's PostgreSQL without delay (the reference for the 80% goals);
#   remote     the same database RTT_MS away;
#   pgbouncer  the same, through PgBouncer (transaction pooling, PG_PREPARED_STATEMENTS=0).
# In each, after WARMUP s, DURATION s of wrk -t2 -c64: GET /users/me, GET /jobs/:id
# (bench/paths.lua), the provider feed, POST /quotes (bench/quotes.lua, a new quote each), and
# POST /quotes at -c8 (its latency without 64 requests queued); then the service's
# db_round_trips per route (GET /metrics).
#
# Output: bench/results/remote/ (latest.txt, latest.tsv, trips.tsv, machine.txt, raw/).
# Knobs: RTT_MS (1), TOPOLOGIES ("loopback remote pgbouncer"), POOL (32), JOBS (100000),
# DURATION (10), WARMUP (3), DELAY (auto, netem or relay), RESULTS, BIN, SERVER_ENV.
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
RTT_MS=${RTT_MS:-1}
TOPOLOGIES=${TOPOLOGIES:-loopback remote pgbouncer}
POOL=${POOL:-32}
JOBS=${JOBS:-100000}
DELAY=${DELAY:-auto}
RESULTS=${RESULTS:-$BENCH/results/remote}

[ "$(id -u)" = 0 ] || die "needs root (a network namespace, a veth pair, tc)"
for tool in wrk psql pgbench ip tc pgbouncer "$PY"; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh bench)"
done

NS=mpbench$$
HOST_IF=mpbh$$
NS_IF=mpbn$$
NET=10.231.$(($$ % 250)).
HOST_IP=${NET}1
DB_IP=${NET}2
ONE_WAY_US=$((RTT_MS * 500))

extra_cleanup() {
  ip netns pids "$NS" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  ip link del "$HOST_IF" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
}

in_ns() { ip netns exec "$NS" "$@"; }

setup_network() {
  ip netns add "$NS"
  ip link add "$HOST_IF" type veth peer name "$NS_IF"
  ip link set "$NS_IF" netns "$NS"
  ip addr add "$HOST_IP/30" dev "$HOST_IF"
  ip link set "$HOST_IF" up
  in_ns ip addr add "$DB_IP/30" dev "$NS_IF"
  in_ns ip link set "$NS_IF" up
  in_ns ip link set lo up
  if [ "$DELAY" != relay ] && tc qdisc add dev "$HOST_IF" root netem delay "${ONE_WAY_US}us" 2>/dev/null; then
    in_ns tc qdisc add dev "$NS_IF" root netem delay "${ONE_WAY_US}us"
    DELAY=netem
  else
    [ "$DELAY" = netem ] && die "the kernel has no netem (DELAY=relay or auto uses build/netdelay)"
    DELAY=relay
    cc -std=c11 -D_GNU_SOURCE -O2 -o "$TMP/netdelay" "$BENCH/netdelay.c"
  fi
  log "network: PostgreSQL at $DB_IP in namespace $NS, delay by $DELAY ($RTT_MS ms round trip)"
}

start_pg_ns() {
  PG_BIN=$(printf '%s\n' /usr/lib/postgresql/*/bin | grep -v '\*' | sort -V | tail -1)
  local d=$TMP/pg
  mkdir -p "$d"
  chown postgres:postgres "$d"
  as_pg "$PG_BIN/initdb" -D "$d/data" -A trust -U postgres --no-sync >/dev/null
  PG_DATA=$d/data
  echo "host all all ${NET}0/30 trust" >>"$d/data/pg_hba.conf"
  # listening on the namespace's address only: loopback inside the namespace for the tools
  in_ns runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$d/data" -l "$d/log" -w start -o "-p 5432 -k $d \
-c listen_addresses=$DB_IP,127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
-c max_connections=300" >/dev/null
  as_pg "$PG_BIN/createdb" -h "$DB_IP" -p 5432 -U postgres mp_bench
}

start_pgbouncer_ns() {
  local d=$TMP/pgbouncer
  mkdir -p "$d"
  printf '"postgres" ""\n' >"$d/users.txt"
  cat >"$d/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=5432
[pgbouncer]
listen_addr = $DB_IP
listen_port = 6432
unix_socket_dir = $d
auth_type = trust
auth_file = $d/users.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = $POOL
logfile = $d/pgbouncer.log
EOF
  chown -R postgres:postgres "$d"
  in_ns runuser -u postgres -- pgbouncer "$d/pgbouncer.ini" >/dev/null 2>&1 &
  track_pid $!
  for _ in $(seq 50); do psql -X -q -h "$DB_IP" -p 6432 -U postgres -d mp_bench -c 'SELECT 1' >/dev/null 2>&1 && return 0; sleep 0.2; done
  die_with "$d/pgbouncer.log" "pgbouncer did not start"
}

# relay listen_port target_port: the delayed hop from the host to the namespace
start_relay() {
  # ahead of the service, PostgreSQL and wrk: it stands in for a network, which takes no CPU
  # from either host
  nice -n -15 "$TMP/netdelay" 127.0.0.1 "$1" "$DB_IP" "$2" "$ONE_WAY_US" &
  track_pid $!
}

# url_for topology: the service's DATABASE_URL
url_for() {
  case $1 in
  loopback) echo "postgres://postgres@$DB_IP:5432/mp_bench" ;;
  remote) [ "$DELAY" = netem ] && echo "postgres://postgres@$DB_IP:5432/mp_bench" ||
    echo "postgres://postgres@127.0.0.1:$RELAY_PG/mp_bench" ;;
  pgbouncer) [ "$DELAY" = netem ] && echo "postgres://postgres@$DB_IP:6432/mp_bench" ||
    echo "postgres://postgres@127.0.0.1:$RELAY_PGB/mp_bench" ;;
  esac
}

# round_trip topology: pgbench's mean latency of SELECT 1 over that path (one client), in ms
round_trip() {
  local url
  url=$(url_for "$1")
  echo 'SELECT 1;' >"$TMP/select1.sql"
  pgbench -n -c1 -T1 -f "$TMP/select1.sql" "$url" >/dev/null 2>&1 || true
  pgbench -n -c1 -T3 -M "$([ "$1" = pgbouncer ] && echo simple || echo prepared)" -f "$TMP/select1.sql" "$url" \
    >"$RAW/$1-pgbench.txt" 2>&1 || die_with "$RAW/$1-pgbench.txt" "pgbench failed"
  sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$RAW/$1-pgbench.txt"
}

# trips topology: the service's mean db_round_trips per route (GET /metrics), one TSV row each
trips() {
  curl -s "http://127.0.0.1:$SRV_PORT/metrics" | "$PY" -c '
import re, sys
sums, counts = {}, {}
for line in sys.stdin:
    m = re.match(r"db_round_trips_(sum|count)\{method=\"(\w+)\",route=\"([^\"]+)\"\} (\S+)", line)
    if m:
        (sums if m.group(1) == "sum" else counts)[(m.group(2), m.group(3))] = float(m.group(4))
for k in sorted(counts):
    if counts[k]:
        print(f"{sys.argv[1]}\t{k[0]} {k[1]}\t{counts[k]:.0f}\t{sums[k] / counts[k]:.2f}")' "$1" >>"$TMP/trips.tsv"
}

# settle_queue base: waits (60 s at most) until the service has no background work pending or
# running (GET /metrics, marketplace_queue_jobs)
settle_queue() {
  local i
  for ((i = 0; i < 120; i++)); do
    curl -s "$1/metrics" | awk '/^marketplace_queue_jobs\{.*state="(pending|running)"/ {n += $2} END {exit n > 0}' &&
      return 0
    sleep 0.5
  done
  log "background work still pending after 60 s"
}

bench_topology() {
  local topo=$1 nth=$2 url base files=$TMP/files-postgres extra=()
  url=$(url_for "$topo")
  log "== $topo ($url)"
  [ "$topo" = pgbouncer ] && extra=(PG_PREPARED_STATEMENTS=0)
  SERVER_ENV="${SERVER_ENV:-} DB_POOL_SIZE=$POOL ${extra[*]}" start_service "$topo" "$url"
  base="http://127.0.0.1:$SRV_PORT"
  printf '%s\tSELECT 1 round trip\t%s\n' "$topo" "$(round_trip "$topo")" >>"$TMP/rtt.tsv"
  measure "$topo" users_me 2 64 "$base/users/me" -H "Authorization: Bearer $(cat "$files/customer.token")"
  BENCH_PATHS=$files/detail.paths measure "$topo" job 2 64 "$base" \
    -H "Authorization: Bearer $(cat "$files/customer.token")" -s "$BENCH/paths.lua"
  measure "$topo" feed 2 64 "$base/jobs" -H "Authorization: Bearer $(cat "$files/feed.token")"
  # every run quotes pairs no other run quoted: a new quote each
  local pairs=$(($(wc -l <"$files/quoters.tokens") * $(wc -l <"$files/open.jobs"))) slice
  slice=$((pairs / 8))
  # spread over the open jobs: 64 providers quoting one job at the same moment would measure
  # that job's row lock, held across the transaction's round trips, rather than the service
  export BENCH_TOKENS=$files/quoters.tokens BENCH_JOBS=$files/open.jobs BENCH_THREADS=2 BENCH_ORDER=spread
  BENCH_START=$((slice * (2 * nth))) wrk_run "$topo-quotes-warmup" 2 64 "$WARMUP" "$base" -s "$BENCH/quotes.lua"
  BENCH_START=$((slice * (2 * nth) + slice / 4)) cpu_wrk_run "$topo-quotes" 2 64 "$DURATION" "$base" --latency \
    -s "$BENCH/quotes.lua"
  record "$topo" quotes 2 64 "$RAW/$topo-quotes.txt" "$CPU_TICKS"
  BENCH_START=$((slice * (2 * nth + 1))) cpu_wrk_run "$topo-quotes_c8" 2 8 "$DURATION" "$base" --latency \
    -s "$BENCH/quotes.lua"
  record "$topo" quotes_c8 2 8 "$RAW/$topo-quotes_c8.txt" "$CPU_TICKS"
  trips "$topo"
  stop_pid "$SRV_PID"
}

# ------------------------------------------------------------------ main

JWT_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
IDLE_BEFORE=$(cpu_idle_pct)
for ((waited = 1; IDLE_BEFORE < 90 && waited < ${IDLE_WAIT:-60}; waited++)); do IDLE_BEFORE=$(cpu_idle_pct); done
log "CPU idle before the run: $IDLE_BEFORE%"
setup_network
start_pg_ns
start_pgbouncer_ns
if [ "$DELAY" = relay ]; then
  RELAY_PG=$(free_port)
  start_relay "$RELAY_PG" 5432
  RELAY_PGB=$(free_port)
  start_relay "$RELAY_PGB" 6432
fi
# migrate through a service on the undelayed path, then seed
start_service seed "$(url_for loopback)"
stop_pid "$SRV_PID"
DB=$(url_for loopback)
log "seeding $JOBS jobs"
seed_to postgres "$JOBS" >/dev/null
# the first start after seeding runs the periodic work over the seeded jobs, which moves the
# feed's versions: let it finish before anything is measured
start_service settle "$(url_for loopback)"
settle_queue "http://127.0.0.1:$SRV_PORT"
stop_pid "$SRV_PID"
printf 'topology\tmeasure\tms\n' >"$TMP/rtt.tsv"
printf 'topology\troute\trequests\tmean_round_trips\n' >"$TMP/trips.tsv"
n=0
for topo in $TOPOLOGIES; do
  case $topo in loopback | remote | pgbouncer) bench_topology "$topo" "$n" ;; *) die "unknown topology $topo" ;; esac
  n=$((n + 1))
done
cp "$TMP/rtt.tsv" "$TMP/trips.tsv" "$RAW/"
write_results "$RESULTS" "$BENCH/summarize_remote.py" \
  "RTT_MS=$RTT_MS delay=$DELAY POOL=$POOL JOBS=$JOBS DURATION=${DURATION}s WARMUP=${WARMUP}s"
