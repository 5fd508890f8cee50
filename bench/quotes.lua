-- POST /quotes for bench/jobs.sh: every request a different (provider, job) pair, so each is
-- a real first quote. BENCH_TOKENS names a file of provider tokens (one per line), BENCH_JOBS
-- a file of open job ids that every one of those providers matches. Thread t of T sends pair
-- t, t+T, t+2T, ...; pair k is provider k mod P on job floor(k / P), so no pair repeats until
-- P x jobs requests. BENCH_START shifts the first pair, so that runs do not repeat pairs.
-- BENCH_ORDER=spread takes pair k as job k mod J by provider floor(k / J) instead: consecutive
-- quotes on different jobs (bench/remote.sh), not 64 providers on one job at once. Answers are counted by status (status_201=..., status_409=...).

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "stats.lua")

count_statuses()

function init(args)
  tokens = read_lines(os.getenv("BENCH_TOKENS") or error("BENCH_TOKENS is not set"))
  jobs = read_lines(os.getenv("BENCH_JOBS") or error("BENCH_JOBS is not set"))
  k, nthreads = request_numbers()
  spread = os.getenv("BENCH_ORDER") == "spread"
  count_init()
end

function request()
  local p, j
  if spread then -- consecutive requests on different jobs, as many customers' jobs are quoted
    j = k % #jobs
    p = math.floor(k / #jobs) % #tokens
  else -- consecutive requests on one job, by every provider in turn
    p = k % #tokens
    j = math.floor(k / #tokens) % #jobs
  end
  k = k + nthreads
  local body = string.format('{"jobId":"%s","amount":%d.50,"note":"Bench quote"}', jobs[j + 1], 40 + k % 200)
  return wrk.format("POST", "/quotes", {
    ["Authorization"] = "Bearer " .. tokens[p + 1],
    ["Content-Type"] = "application/json",
  }, body)
end
