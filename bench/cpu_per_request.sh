#!/usr/bin/env bash
# CPU time a server spends per request, which moves far less with the machine's other load
# than requests/s do: the utime+stime of the given processes over one wrk run, divided by
# the requests wrk completed.
#
#   bench/cpu_per_request.sh "PID [PID...]" URL [SECONDS] [wrk args...]
#   e.g. bench/cpu_per_request.sh "$(pgrep -P "$(cat nginx.pid)")" http://127.0.0.1:8081/ 5
#
# Prints: URL rps=R cpu_us_per_req=U (wrk -t2 -c64).
set -euo pipefail
pids=$1 url=$2 secs=${3:-5}
shift $(($# < 3 ? $# : 3))
ticks() {
  local sum=0 p
  for p in $pids; do sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo "$sum"
}
hz=$(getconf CLK_TCK)
before=$(ticks)
out=$(wrk -t2 -c64 -d"${secs}s" "$@" "$url")
after=$(ticks)
requests=$(awk '/requests in/ {print $1}' <<<"$out")
rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
echo "$url rps=$rps cpu_us_per_req=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$requests" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')"
