-- Machine-readable result line for bench/run.sh: `wrk -s bench/stats.lua ...` prints, after
-- wrk's own report, one line
--   BENCH requests=N duration_s=S rps=R mean_ms=.. p50_ms=.. p99_ms=.. max_ms=.. non2xx=.. connect_err=..
--         read_err=.. write_err=.. timeouts=..[ extra]
-- Other scripts (login.lua) load this file and call bench_report() from their own done().

function bench_report(summary, latency, extra)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    "BENCH requests=%d duration_s=%.3f rps=%.1f mean_ms=%.3f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f " ..
    "non2xx=%d connect_err=%d read_err=%d write_err=%d timeouts=%d%s\n",
    summary.requests, secs, summary.requests / secs, latency.mean / 1000,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    e.status, e.connect, e.read, e.write, e.timeout, extra or ""))
end

function done(summary, latency, requests)
  bench_report(summary, latency)
end

-- Answers counted by HTTP status, for scripts that want them (login.lua, quotes.lua,
-- writes.lua): they call count_statuses() once (setup, response and done), and count_init()
-- from init(); the BENCH line then ends with status_<code>=N fields. Every thread counts in
-- its own Lua state; done() adds them up. count_setup gives each thread its number, tid, and,
-- when BENCH_ADDRS lists several host:port (one service each, on one database), sends thread t
-- to the (t mod n)-th of them: one wrk run over several instances.
local counted = {}

function count_setup(thread)
  table.insert(counted, thread)
  thread:set("tid", #counted - 1)
  local addrs = {}
  for a in (os.getenv("BENCH_ADDRS") or ""):gmatch("[^,]+") do table.insert(addrs, a) end
  if #addrs > 0 then
    local host, port = addrs[(#counted - 1) % #addrs + 1]:match("^(.*):(%d+)$")
    thread.addr = wrk.lookup(host, port)[1]
  end
  return #counted - 1
end

function count_statuses()
  setup = count_setup
  response = function(status) count_response(status) end
  done = count_done
end

-- The first request number of this thread and the step between its requests, for scripts
-- that send each request once (quotes.lua, writes.lua): thread t of BENCH_THREADS sends
-- BENCH_START + t, then + BENCH_THREADS each time, so threads and runs never overlap.
function request_numbers()
  return tonumber(os.getenv("BENCH_START") or "0") + tid, tonumber(os.getenv("BENCH_THREADS") or "2")
end

function count_init()
  statuses = {}
end

function count_response(status)
  statuses[status] = (statuses[status] or 0) + 1
end

function count_done(summary, latency, requests)
  local total, next_k = {}, nil
  for _, t in ipairs(counted) do
    for code, n in pairs(t:get("statuses") or {}) do
      total[code] = (total[code] or 0) + n
    end
    local k = t:get("k") -- scripts with request numbers: the one each thread would take next
    if k and (not next_k or k > next_k) then next_k = k end
  end
  local codes = {}
  for code in pairs(total) do table.insert(codes, code) end
  table.sort(codes)
  local extra = ""
  for _, code in ipairs(codes) do
    extra = extra .. string.format(" status_%d=%d", code, total[code])
  end
  -- past every request number the run took: where a run that must not repeat them starts
  if next_k then extra = extra .. string.format(" next_k=%d", next_k) end
  bench_report(summary, latency, extra)
end

-- The non-empty lines of a file, for scripts that read tokens, paths or job ids.
function read_lines(path)
  local out = {}
  for line in io.lines(path) do
    if line ~= "" then table.insert(out, line) end
  end
  return out
end
