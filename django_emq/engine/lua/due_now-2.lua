--[[
  due_now: make a scheduled job (deferred, or backing off before a retry) due
  at once; the next promote moves it into its lane at its mint place.

  KEYS[1]  schedule  zset   deferred job ids by due time (ms)
  KEYS[2]  job       hash   the job row

  ARGV[1]  id        the job id

  Returns 1, or -1 (no such job) / -3 (the job is not scheduled).
]]
-- @include "expect_type"
-- @include "guard"
-- @include "now_ms"

local state = guard(KEYS[2], 'HGET', KEYS[2], 'state')
if not state then return -1 end
if state ~= 'scheduled' then return -3 end
expectType(KEYS[1], 'zset')
local now = nowMs()
redis.call('ZADD', KEYS[1], 'XX', now, ARGV[1])
redis.call('HSET', KEYS[2], 'due', now)
return 1
