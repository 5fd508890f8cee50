-- Login flood for bench/run.sh: POST /auth/login with the account named by the environment
-- variables BENCH_EMAIL and BENCH_PASSWORD, counting the answers by HTTP status.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "stats.lua")

local email = os.getenv("BENCH_EMAIL") or error("BENCH_EMAIL is not set")
local password = os.getenv("BENCH_PASSWORD") or error("BENCH_PASSWORD is not set")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.format('{"email":"%s","password":"%s"}', email, password)

count_statuses()
init = count_init
