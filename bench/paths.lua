-- GET requests cycling over the paths listed, one per line, in the file named by BENCH_PATHS
-- (bench/jobs.sh: GET /jobs/:id over the bench customer's jobs). Each thread starts at its
-- own offset. Adds the BENCH line of stats.lua.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "stats.lua")

local count = 0

function setup(thread)
  count = count + 1
  thread:set("offset", count * 37)
end

function init(args)
  paths = {}
  for line in io.lines(os.getenv("BENCH_PATHS") or error("BENCH_PATHS is not set")) do
    table.insert(paths, line)
  end
  i = offset or 0
end

function request()
  i = i + 1
  return wrk.format("GET", paths[i % #paths + 1])
end
