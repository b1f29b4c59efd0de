--[[
  extend: push a claimed job's lease deadline out, fenced by its token.

  KEYS[1]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[2]  job       hash   the job row

  ARGV[1]  id        the job id
  ARGV[2]  token     the attempt number the claim returned
  ARGV[3]  lease_ms  new lease length from now (server clock)

  Returns the new deadline (ms), or -1 (no such job) / -2 (stale token).
]]
-- @include "expect_type"
-- @include "fence"
-- @include "now_ms"

local lane = fence(KEYS[2], ARGV[2])
if type(lane) == 'number' then return lane end
expectType(KEYS[1], 'zset')
local deadline = nowMs() + tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], 'XX', deadline, ARGV[1])
return deadline
