#!/usr/bin/env bash
# The goals of issue 12, side by side with a Node service (`make bench-peer`; docs/performance.md).
#
# The Node peer (../shared/bench/peer-node: fastify, fast-jwt, better-sqlite3, one process per
# CPU) is copied under the results folder, installed with `npm install` and seeded with
# `node seed.js` (JOBS jobs, about 200 in its provider's feed). The service runs on SQLite in
# production mode, seeded by bench/seed_jobs.py with the same sizes (JOBS jobs, 200 in the
# feed provider's feed), then on a private PostgreSQL cluster. With wrk -t2 -c64, DURATION s
# after WARMUP s each:
#   1. GET /health, GET /users/me, the provider feed (GET /jobs) and POST /quotes (every
#      request a new provider and job pair, only 201s counted; issue 37), the peer and the
#      service alternating over ROUNDS rounds (SQLite);
#   2. GET /jobs/:id (the owner's view of a job with 3 quotes and a payment-less state) on
#      SQLite, then GET /users/me, the feed, GET /jobs/:id and POST /quotes on PostgreSQL.
# Each measurement also records the answer's size, the server's peak RSS (VmHWM) and its CPU
# time per request over the measured run (bench/lib.sh, measure; for the peer, summed over its
# processes). The summary prints the ratio table of the issue and every
# goal as met or missed. Exits 0 whether or not the goals are met.
#
# Output: bench/results/peer/ (latest.txt, latest.tsv, rss.tsv, bytes.tsv, machine.txt, raw/,
# and peer/, the peer's copy with its node_modules).
# Knobs: ENGINES, DURATION (10), WARMUP (3), ROUNDS (2), JOBS (100000), PEER_SRC
# (../shared/bench/peer-node), RESULTS, BIN, SERVER_ENV.
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROUNDS=${ROUNDS:-2}
JOBS=${JOBS:-100000}
RESULTS=${RESULTS:-$BENCH/results/peer}
# ../shared beside the repository; from a git worktree elsewhere, beside the main checkout
main_checkout=$(cd "$ROOT" && cd "$(git rev-parse --git-common-dir 2>/dev/null || echo .git)/.." 2>/dev/null && pwd || echo "$ROOT")
PEER_SRC=${PEER_SRC:-$([ -d "$ROOT/../shared" ] && echo "$ROOT/../shared" || echo "$main_checkout/../shared")/bench/peer-node}
THREADS=2
CONNS=64

for tool in wrk node npm psql "$PY"; do command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh bench)"; done
[ -f "$PEER_SRC/peer.js" ] || die "the Node peer is not at $PEER_SRC (PEER_SRC)"

# rss engine scenario pid...: the servers' peak and current RSS (kB, summed over the pids)
rss() {
  local engine=$1 scenario=$2 hwm=0 now=0 p
  shift 2
  for p in "$@"; do
    hwm=$((hwm + $(awk '/^VmHWM/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
    now=$((now + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
  done
  printf '%s\t%s\t%s\t%s\n' "$engine" "$scenario" "$hwm" "$now" >>"$TMP/rss.tsv"
}

# bytes engine scenario url [curl args]: the size of one answer
bytes() {
  local engine=$1 scenario=$2 url=$3
  shift 3
  printf '%s\t%s\t%s\n' "$engine" "$scenario" "$(curl -s -o /dev/null -w '%{size_download}' "$@" "$url")" >>"$TMP/bytes.tsv"
}

# ------------------------------------------------------------------ the Node peer

PEER_DIR=$RESULTS/peer
PEER_PIDS=()

start_peer() {
  log "the Node peer: copying $PEER_SRC, npm install, node seed.js ($JOBS jobs)"
  mkdir -p "$RESULTS"
  rm -rf "$PEER_DIR"
  cp -r "$PEER_SRC" "$PEER_DIR"
  chmod -R u+w "$PEER_DIR"
  (cd "$PEER_DIR" && timeout 600 npm install --silent --no-audit --no-fund >"$TMP/npm.log" 2>&1) ||
    die_with "$TMP/npm.log" "npm install failed"
  mkdir -p "$TMP/files-node" # its quoters' tokens and open jobs, for POST /quotes
  (cd "$PEER_DIR" && JWT_SECRET=$JWT_SECRET timeout 600 node seed.js "$TMP/peer.db" "$JOBS" "$TMP/files-node" \
    >"$TMP/peer-tokens.json") ||
    die "node seed.js failed"
  PEER_PORT=$(free_port)
  # in a session of its own, like the service: its node:cluster workers share its process group
  env -C "$PEER_DIR" JWT_SECRET="$JWT_SECRET" DB="sqlite:$TMP/peer.db" PORT="$PEER_PORT" setsid node peer.js \
    >"$TMP/peer.log" 2>&1 &
  PEER_PID=$!
  track_pid "$PEER_PID"
  wait_http "http://127.0.0.1:$PEER_PORT/health" "$PEER_PID" || die_with "$TMP/peer.log" "the peer did not start"
  local w
  for w in $(pgrep -P "$PEER_PID" || true); do track_pid "$w"; done
  PEER_USER=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["user"])' "$TMP/peer-tokens.json")
  PEER_PROVIDER=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["provider"])' "$TMP/peer-tokens.json")
}

peer_pids() { echo "$PEER_PID" $(pgrep -P "$PEER_PID" || true); }

stop_peer() {
  local w
  for w in $(pgrep -P "$PEER_PID" || true); do stop_pid "$w"; done
  stop_pid "$PEER_PID"
}

# ------------------------------------------------------------------ the service

# quotes engine base slot: POST /quotes, every request a new (provider, job) pair. The pairs
# (quoters x open jobs, $TMP/files-ENGINE) are cut into 2 x (ROUNDS + 1) slices; a warm-up and
# its measurement take slices 2 x slot and 2 x slot + 1, so no round repeats a pair (a repeated
# pair answers 409, and only 201s count).
quotes() {
  local engine=$1 base=$2 slot=$3 files=$TMP/files-$1
  local slice=$(($(quote_pairs "$files") / (2 * (ROUNDS + 1))))
  measure_quotes "$engine" quotes "$engine-quotes${ROUND:+-r$ROUND}" "$base" "$files" $((2 * slot * slice)) \
    $(((2 * slot + 1) * slice))
}

bench_engine() {
  local engine=$1
  log "== $engine"
  start_engine "$engine"
  log "seeding the service ($engine) with $JOBS jobs"
  seed_to "$engine" "$JOBS"
  local base="http://127.0.0.1:$SRV_PORT" files=$TMP/files-$engine
  local customer="Authorization: Bearer $(cat "$files/customer.token")"
  local feed="Authorization: Bearer $(cat "$files/feed.token")"
  bytes "$engine" users_me "$base/users/me" -H "$customer"
  bytes "$engine" feed "$base/jobs" -H "$feed"
  bytes "$engine" job_detail "$base$(head -1 "$files/detail.paths")" -H "$customer"

  local round
  if [ "$engine" = sqlite ]; then
    bytes node users_me "http://127.0.0.1:$PEER_PORT/users/me" -H "Authorization: Bearer $PEER_USER"
    bytes node feed "http://127.0.0.1:$PEER_PORT/jobs" -H "Authorization: Bearer $PEER_PROVIDER"
    log "1. the peer and the service alternating, $ROUNDS rounds (-t$THREADS -c$CONNS -d${DURATION}s)"
    for ((round = 1; round <= ROUNDS; round++)); do
      CPU_PIDS=$(peer_pids) ROUND=$round measure node health "$THREADS" "$CONNS" "http://127.0.0.1:$PEER_PORT/health"
      ROUND=$round measure sqlite health "$THREADS" "$CONNS" "$base/health"
      CPU_PIDS=$(peer_pids) ROUND=$round measure node users_me "$THREADS" "$CONNS" "http://127.0.0.1:$PEER_PORT/users/me" \
        -H "Authorization: Bearer $PEER_USER"
      rss node users_me $(peer_pids)
      ROUND=$round measure sqlite users_me "$THREADS" "$CONNS" "$base/users/me" -H "$customer"
      rss sqlite users_me "$SRV_PID"
      CPU_PIDS=$(peer_pids) ROUND=$round measure node feed "$THREADS" "$CONNS" "http://127.0.0.1:$PEER_PORT/jobs" \
        -H "Authorization: Bearer $PEER_PROVIDER"
      rss node feed $(peer_pids)
      ROUND=$round measure sqlite feed "$THREADS" "$CONNS" "$base/jobs" -H "$feed"
      rss sqlite feed "$SRV_PID"
      CPU_PIDS=$(peer_pids) ROUND=$round quotes node "http://127.0.0.1:$PEER_PORT" "$round"
      rss node quotes $(peer_pids)
      ROUND=$round quotes sqlite "$base" "$round"
      rss sqlite quotes "$SRV_PID"
    done
  else
    log "1. GET /users/me and the feed (-t$THREADS -c$CONNS -d${DURATION}s)"
    measure "$engine" users_me "$THREADS" "$CONNS" "$base/users/me" -H "$customer"
    rss "$engine" users_me "$SRV_PID"
    measure "$engine" feed "$THREADS" "$CONNS" "$base/jobs" -H "$feed"
    rss "$engine" feed "$SRV_PID"
  fi
  log "2. GET /jobs/:id and POST /quotes (-t$THREADS -c$CONNS -d${DURATION}s)"
  BENCH_PATHS=$files/detail.paths measure "$engine" job_detail "$THREADS" "$CONNS" "$base" -H "$customer" \
    -s "$BENCH/paths.lua"
  rss "$engine" job_detail "$SRV_PID"
  if [ "$engine" != sqlite ]; then
    quotes "$engine" "$base" 0
    rss "$engine" quotes "$SRV_PID"
  fi
  grep -c '"status":5' "$SRV_LOG" | sed "s/^/$engine\t/" >>"$TMP/errors5xx.tsv" || true

  stop_pid "$SRV_PID"
  [ "$engine" = postgres ] && stop_pg
  return 0
}

# ------------------------------------------------------------------ main

: >"$TMP/rss.tsv"
: >"$TMP/bytes.tsv"
: >"$TMP/errors5xx.tsv"
begin_run
start_peer
for engine in $ENGINES; do
  case $engine in sqlite | postgres) bench_engine "$engine" ;; *) die "unknown engine $engine" ;; esac
  # the peer answers nothing while PostgreSQL runs: stop it after the SQLite rounds
  if [ "$engine" = sqlite ]; then stop_peer; fi
done

mkdir -p "$RESULTS"
cp "$TMP/rss.tsv" "$TMP/bytes.tsv" "$TMP/errors5xx.tsv" "$RESULTS/"
write_results "$RESULTS" "$BENCH/summarize_peer.py" \
  "settings: DURATION=${DURATION}s WARMUP=${WARMUP}s ROUNDS=${ROUNDS} JOBS=${JOBS}; node $(node --version)"
