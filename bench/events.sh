#!/usr/bin/env bash
# Live-updates benchmark (`make bench-events`); docs/performance.md explains what it measures.
#
# Per configuration: SQLite with one instance, then one private PostgreSQL cluster with two
# instances (the writer on A, the streams and the probe on B):
#   0. bench/seed_events.py seeds ACCOUNTS customers (the stream holders) and THREADS message
#      threads, straight into the tables;
#   1. without streams: the writer posts RATE messages a second (bench/sse_load write) while
#      wrk measures GET /users/me on the stream instance (-t2 -c64), after a warm-up;
#   2. STREAMS streams opened on the stream instance (5 per account, bench/sse_load streams),
#      its VmRSS read before and once they all answered and idled SETTLE s: memory per stream;
#   3. the writer at RATE for LATENCY s: every message reaches its customer's 5 streams, and each
#      receipt's time from the message's createdAt (written by its handler just before the
#      commit: an upper bound of commit-to-receipt) and from its request;
#   4. the writer again and wrk GET /users/me as in 1, with the streams held: the ratio to 1,
#      and the receipts' latency under that load.
# Goals: p99 <= 100 ms (3 and 4), <= 16 KiB per idle stream, /users/me >= 80% of 1.
#
# Output: bench/results/events/ (latest.txt, latest.tsv, machine.txt, raw/).
# Knobs: CONFIGS ("sqlite postgres-2"), STREAMS (10000), ACCOUNTS (2000), THREADS (200),
# RATE (200), LATENCY (30), SETTLE (5), DURATION (10), WARMUP (3), RESULTS, BIN, SSE_BIN,
# SERVER_ENV. Run as root it leaves the kernel's autogroup setting alone unless AUTOGROUP=off.
set -euo pipefail

AUTOGROUP=${AUTOGROUP:-keep}
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CONFIGS=${CONFIGS:-sqlite postgres-2}
STREAMS=${STREAMS:-10000}
ACCOUNTS=${ACCOUNTS:-2000}
THREADS=${THREADS:-200}
RATE=${RATE:-200}
LATENCY=${LATENCY:-30}
SETTLE=${SETTLE:-5}
RESULTS=${RESULTS:-$BENCH/results/events}
SSE_BIN=${SSE_BIN:-$ROOT/build/sse_load}

for tool in wrk psql "$PY"; do command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh bench)"; done
[ -x "$SSE_BIN" ] || die "$SSE_BIN not built (make build/sse_load)"

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# kv engine scenario key=value...: one row of the results
kv() {
  local engine=$1 scenario=$2
  shift 2
  printf '%s\t%s\t%s\n' "$engine" "$scenario" "$*" >>"$TMP/events.tsv"
  log "  $scenario: $*"
}

# writer name base seconds: the writer in the background (WRITER_PID)
writer() {
  "$SSE_BIN" write "$2" "$FILES/writer.targets" "$RATE" "$3" >"$RAW/$1.txt" 2>&1 &
  WRITER_PID=$!
  track_pid "$WRITER_PID"
}

writer_wait() { # name: waits for the writer and records its BENCH line
  local rc=0
  wait "$WRITER_PID" || rc=$?
  forget_pid "$WRITER_PID"
  [ "$rc" = 0 ] || die_with "$RAW/$1.txt" "the writer failed ($1)"
}

bench_config() {
  local config=$1 write_base stream_base stream_pid db engine
  log "== $config"
  if [ "$config" = sqlite ]; then
    engine=sqlite
    start_engine sqlite
    db=$DB
    write_base="http://127.0.0.1:$SRV_PORT" stream_base=$write_base stream_pid=$SRV_PID
  else
    engine=postgres
    start_pg
    db=$PG_URL
    start_service postgres-a "$PG_URL"
    write_base="http://127.0.0.1:$SRV_PORT"
    start_service postgres-b "$PG_URL"
    stream_base="http://127.0.0.1:$SRV_PORT" stream_pid=$SRV_PID
  fi
  FILES=$TMP/files-$config
  "$PY" "$BENCH/seed_events.py" --engine "$engine" --db "$db" --secret "$JWT_SECRET" --accounts "$ACCOUNTS" \
    --threads "$THREADS" --out "$FILES"
  local me="Authorization: Bearer $(head -1 "$FILES/streams.tokens")"
  check_me "$stream_base" "$(head -1 "$FILES/streams.tokens")"

  log "1. GET /users/me without streams, $RATE messages/s written"
  writer "$config-writer-base" "$write_base" $((WARMUP + DURATION + 2))
  measure "$config" me_without 2 64 "$stream_base/users/me" -H "$me"
  writer_wait "$config-writer-base"
  kv "$config" writer_base "$(grep '^BENCH' "$RAW/$config-writer-base.txt")"

  log "2. $STREAMS streams"
  local before after
  before=$(rss_kib "$stream_pid")
  "$SSE_BIN" streams "$stream_base" "$FILES/streams.tokens" "$STREAMS" 100000 >"$RAW/$config-streams.txt" 2>&1 &
  local streams_pid=$!
  track_pid "$streams_pid"
  local t0=$SECONDS
  until grep -q '^READY' "$RAW/$config-streams.txt"; do
    kill -0 "$streams_pid" 2>/dev/null || die_with "$RAW/$config-streams.txt" "the streams ended early"
    ((SECONDS - t0 < 300)) || die "the streams did not all answer within 300 s"
    sleep 0.5
  done
  local connected
  connected=$(awk '/^READY/ {print $2}' "$RAW/$config-streams.txt")
  sleep "$SETTLE"
  after=$(rss_kib "$stream_pid")
  kv "$config" streams "open=$connected seconds_to_open=$((SECONDS - t0 - SETTLE)) rss_before_kib=$before" \
    "rss_after_kib=$after per_stream_kib=$(awk -v a="$after" -v b="$before" -v n="$connected" 'BEGIN {printf "%.2f", (a - b) / n}')"

  log "3. $RATE messages/s for $LATENCY s to the streams"
  kill -USR1 "$streams_pid" # forget the receipts so far (none: nothing was written)
  writer "$config-writer-latency" "$write_base" "$LATENCY"
  writer_wait "$config-writer-latency"
  sleep 1 # the last receipts
  kill -USR1 "$streams_pid"
  sleep 0.5
  kv "$config" writer_latency "$(grep '^BENCH' "$RAW/$config-writer-latency.txt")"
  kv "$config" latency "$(grep '^BENCH' "$RAW/$config-streams.txt" | tail -1)"

  log "4. GET /users/me with the streams held, $RATE messages/s written"
  writer "$config-writer-load" "$write_base" $((WARMUP + DURATION + 2))
  measure "$config" me_with 2 64 "$stream_base/users/me" -H "$me"
  writer_wait "$config-writer-load"
  sleep 1
  kill -TERM "$streams_pid"
  wait "$streams_pid" || true
  forget_pid "$streams_pid"
  kv "$config" writer_load "$(grep '^BENCH' "$RAW/$config-writer-load.txt")"
  kv "$config" latency_load "$(grep '^BENCH' "$RAW/$config-streams.txt" | tail -1)"
  kv "$config" rss_end "kib=$(rss_kib "$stream_pid")"

  # every instance of the configuration, then the cluster
  local p
  for p in "${PIDS[@]}"; do stop_pid "$p"; done
  stop_pg
}

# ------------------------------------------------------------------ main

JWT_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
IDLE_BEFORE=$(cpu_idle_pct)
for ((waited = 1; IDLE_BEFORE < 90 && waited < ${IDLE_WAIT:-60}; waited++)); do IDLE_BEFORE=$(cpu_idle_pct); done
log "CPU idle before the run: $IDLE_BEFORE%, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'config\tscenario\tvalues\n' >"$TMP/events.tsv"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for config in $CONFIGS; do
  case $config in sqlite | postgres-2) bench_config "$config" ;; *) die "unknown configuration $config" ;; esac
done
cat "$TMP/events.tsv" >>"$RAW/events.tsv"
write_results "$RESULTS" "$BENCH/summarize_events.py" \
  "settings: STREAMS=$STREAMS ACCOUNTS=$ACCOUNTS THREADS=$THREADS RATE=$RATE LATENCY=$LATENCY DURATION=$DURATION
load average before: $LOAD_BEFORE; after: $(cut -d' ' -f1-3 /proc/loadavg)"
