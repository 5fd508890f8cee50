-- Machine-readable result line for bench/run.sh: `wrk -s bench/stats.lua ...` prints, after
-- wrk's own report, one line
--   BENCH requests=N duration_s=S rps=R p50_ms=.. p99_ms=.. max_ms=.. non2xx=.. connect_err=..
--         read_err=.. write_err=.. timeouts=..[ extra]
-- Other scripts (login.lua) load this file and call bench_report() from their own done().

function bench_report(summary, latency, extra)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    "BENCH requests=%d duration_s=%.3f rps=%.1f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f " ..
    "non2xx=%d connect_err=%d read_err=%d write_err=%d timeouts=%d%s\n",
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    e.status, e.connect, e.read, e.write, e.timeout, extra or ""))
end

function done(summary, latency, requests)
  bench_report(summary, latency)
end
