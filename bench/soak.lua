-- The mixed load of bench/soak.sh: each connection cycles through GET /users/me, the provider
-- feed, GET /jobs/:id and POST /quotes (a new (provider, job) pair each, as bench/quotes.lua),
-- counting the answers by status. Environment: BENCH_CUSTOMER, BENCH_FEED (tokens),
-- BENCH_PATHS (job paths), BENCH_TOKENS and BENCH_JOBS (quoters and open jobs), BENCH_THREADS.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "stats.lua")

function setup(thread)
  thread:set("tid", count_setup(thread))
end

function init(args)
  customer = "Bearer " .. read_lines(os.getenv("BENCH_CUSTOMER"))[1]
  feed = "Bearer " .. read_lines(os.getenv("BENCH_FEED"))[1]
  paths = read_lines(os.getenv("BENCH_PATHS"))
  tokens = read_lines(os.getenv("BENCH_TOKENS"))
  jobs = read_lines(os.getenv("BENCH_JOBS"))
  nthreads = tonumber(os.getenv("BENCH_THREADS") or "1")
  k = tid
  n = 0
  count_init()
end

function request()
  n = n + 1
  local step = n % 4
  if step == 0 then
    return wrk.format("GET", "/users/me", {["Authorization"] = customer})
  elseif step == 1 then
    return wrk.format("GET", "/jobs", {["Authorization"] = feed})
  elseif step == 2 then
    return wrk.format("GET", paths[n % #paths + 1], {["Authorization"] = customer})
  end
  local p = k % #tokens
  local j = math.floor(k / #tokens) % #jobs
  k = k + nthreads
  local body = string.format('{"jobId":"%s","amount":%d.50,"note":"Soak quote"}', jobs[j + 1], 40 + k % 200)
  return wrk.format("POST", "/quotes", {["Authorization"] = "Bearer " .. tokens[p + 1],
    ["Content-Type"] = "application/json"}, body)
end

function response(status, headers, body)
  count_response(status)
end

done = count_done
