-- @include "index_policy"
-- @include "starts_key"

-- rateTaken(prefix, lane, now, count, per, n): record n starts now; when the
-- window is full, the lane is throttled until its oldest start leaves it.
-- Returns true when the lane is throttled (the caller takes it off the ring).
local function rateTaken(prefix, lane, now, count, per, n)
  local key = startsKey(prefix, lane)
  if n > 0 then
    local stamps = {}
    for i = 1, n do stamps[i] = now end
    redis.call('RPUSH', key, unpack(stamps))
    redis.call('LTRIM', key, -count, -1)
    redis.call('PEXPIRE', key, per)
  end
  if redis.call('LLEN', key) < count then return false end
  local due = tonumber(redis.call('LINDEX', key, 0)) + per
  redis.call('ZADD', prefix .. 'throttled', due, lane)
  indexPolicy(prefix, 'throttled', nil, true)  -- the policy index says so (check.lua)
  return true
end
