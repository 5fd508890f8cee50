-- One write a request for bench/writes.sh, each a valid new one: the environment names what.
--   BENCH_TOKENS   a file of bearer tokens, one per line
--   BENCH_TARGETS  a file of "<token index> <path>" lines, one per request (a job to move, a
--                  quote to accept, a job to message); without it every request goes to
--                  BENCH_PATH with the tokens in turn (POST /jobs)
--   BENCH_METHOD   POST (default) or PATCH
--   BENCH_BODY     the JSON body, a string.format pattern given the request number (%d), or
--                  empty for none
-- Request numbers as in quotes.lua (BENCH_START, BENCH_THREADS: stats.lua, request_numbers);
-- request k takes target k, so a warm-up and its measurement take disjoint ranges, and a run
-- longer than its targets repeats them (the repeats answer 409: the run shows them). Answers
-- are counted by status.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "stats.lua")

count_statuses()

function init(args)
  tokens = read_lines(os.getenv("BENCH_TOKENS") or error("BENCH_TOKENS is not set"))
  method = os.getenv("BENCH_METHOD") or "POST"
  body = os.getenv("BENCH_BODY") or ""
  targets = nil
  if os.getenv("BENCH_TARGETS") then
    targets = {}
    for _, line in ipairs(read_lines(os.getenv("BENCH_TARGETS"))) do
      local t, path = line:match("^(%d+)%s+(%S+)$")
      table.insert(targets, {tokens[tonumber(t) + 1] or error("no token " .. t), path})
    end
  else
    path = os.getenv("BENCH_PATH") or error("BENCH_PATH or BENCH_TARGETS must be set")
  end
  k, nthreads = request_numbers()
  count_init()
end

function request()
  local token, p
  if targets then
    local t = targets[k % #targets + 1]
    token, p = t[1], t[2]
  else
    token, p = tokens[k % #tokens + 1], path
  end
  local headers = {["Authorization"] = "Bearer " .. token}
  local b = nil
  if body ~= "" then
    b = string.format(body, k)
    headers["Content-Type"] = "application/json"
  end
  k = k + nthreads
  return wrk.format(method, p, headers, b)
end
