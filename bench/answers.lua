-- wrk's script for the answers scenario (bench/scenarios/answers.py):
--   wrk -t1 -cC -dMAXs --timeout 30s -s bench/answers.lua URL -- LINKS_FILE ROUND answers|trivial
-- LINKS_FILE has one line per player, "KIND TOKEN ADDRESS". `answers` POSTs each player's answer once (an
-- invitation response or questionnaire answers that change with ROUND, so each POST writes); `trivial`
-- GETs /health/live as often, from the same addresses. One thread: it counts the statuses and times the
-- run from its first request to the last answer (wrk's own duration is -d), then ends wrk early. Its
-- result is one JSON line.
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]]
local ts = ffi.new("bench_timespec")
local function now()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local links = {}
local sent, round, mode = 0, 0, "answers"
local probed = false
-- Globals: done() reads them from the thread.
statuses, answered, started, finished = {}, 0, 0, 0

function init(args)
  round = tonumber(args[2]) or 0
  mode = args[3] or "answers"
  for line in io.lines(args[1]) do
    local kind, token, address = line:match("(%S+) (%S+) (%S+)")
    table.insert(links, { kind, token, address })
  end
end

function request()
  if not probed then -- wrk asks for one request before the run to check it, and never sends that one
    probed = true
    return wrk.format("GET", "/health/live")
  end
  if sent == 0 then started = now() end
  sent = sent + 1
  if sent > #links then -- every request of the run is out: the connections still open ask for a 404
    return wrk.format("GET", "/bench-overflow")
  end
  local link = links[sent]
  if mode == "trivial" then
    return wrk.format("GET", "/health/live", { ["X-Forwarded-For"] = link[3] })
  end
  local body
  if link[1] == "INVITATION" then
    body = (round % 2 == 0) and '{"response":"accepted"}' or '{"response":"denied"}'
  else
    -- the built-in wellness check (trainings/answers/presets.py), changing every round (1 to 7)
    body = '{"answers":{"sleep_quality":' .. (1 + round % 7) .. ',"fatigue":3,"stress":2,"soreness":4}}'
  end
  return wrk.format("POST", "/api/answer-links/" .. link[2] .. "/",
    { ["X-Forwarded-For"] = link[3], ["Content-Type"] = "application/json" }, body)
end

function response(status, headers, body)
  if status == 404 then return end -- an overflow request
  statuses[status] = (statuses[status] or 0) + 1
  answered = answered + 1
  if answered == #links then
    finished = now()
    wrk.thread:stop()
    -- wrk's main thread sleeps for -d; a SIGINT once this thread is gone ends that wait.
    os.execute("(sleep 0.2; kill -INT $PPID) &")
  end
end

local thread
function setup(t) thread = t end

function done(summary, latency, requests)
  local parts = {}
  for code, count in pairs(thread:get("statuses")) do table.insert(parts, '"' .. code .. '":' .. count) end
  local errors = summary.errors
  io.write(string.format(
    '{"statuses":{%s},"seconds":%.4f,"p50_ms":%.2f,"p99_ms":%.2f,"socket_errors":%d}\n',
    table.concat(parts, ","), thread:get("finished") - thread:get("started"), latency:percentile(50) / 1e3,
    latency:percentile(99) / 1e3, errors.connect + errors.read + errors.write + errors.timeout))
end
