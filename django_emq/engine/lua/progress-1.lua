--[[
  progress: a running job reports how far it has got. Kept on the row as
  `progress` (JSON: {"done": 0.0..1.0, "note": "...", "at": server ms}); a job
  that is not running (finished, or its lease moved on) is left alone.

  KEYS[1]  job       hash   the job row

  ARGV[1]  done      the fraction done, 0..1
  ARGV[2]  note      a short note (may be empty)

  Returns 1 when kept, 0 when the job is not running, -1 (no such job).
]]
-- @include "guard"
-- @include "now_ms"

local state = guard(KEYS[1], 'HGET', KEYS[1], 'state')
if not state then return -1 end
if state ~= 'active' then return 0 end
redis.call('HSET', KEYS[1], 'progress',
  cjson.encode({done = tonumber(ARGV[1]), note = ARGV[2], at = nowMs()}))
return 1
