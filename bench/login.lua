-- Login flood for bench/run.sh: POST /auth/login with the account named by the environment
-- variables BENCH_EMAIL and BENCH_PASSWORD, counting the answers by HTTP status. Every
-- thread counts in its own Lua state; done() adds the counts up and appends them to the
-- BENCH line as status_<code>=N fields.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "stats.lua")

local email = os.getenv("BENCH_EMAIL") or error("BENCH_EMAIL is not set")
local password = os.getenv("BENCH_PASSWORD") or error("BENCH_PASSWORD is not set")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.format('{"email":"%s","password":"%s"}', email, password)

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  statuses = {}
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    for code, n in pairs(t:get("statuses") or {}) do
      total[code] = (total[code] or 0) + n
    end
  end
  local codes = {}
  for code in pairs(total) do table.insert(codes, code) end
  table.sort(codes)
  local extra = ""
  for _, code in ipairs(codes) do
    extra = extra .. string.format(" status_%d=%d", code, total[code])
  end
  bench_report(summary, latency, extra)
end
