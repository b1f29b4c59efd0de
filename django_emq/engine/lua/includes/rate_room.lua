-- @include "starts_key"

-- rateRoom(prefix, lane, now, count, per): how many more jobs the lane may
-- start now. Starts that left the window are dropped on the way (each entry
-- is pushed once and dropped once: O(1) per job). Returns nil and
-- {key, error} when the lane's log holds the wrong type (nothing written).
local function rateRoom(prefix, lane, now, count, per)
  local key = startsKey(prefix, lane)
  local oldest = redis.pcall('LINDEX', key, 0)
  if type(oldest) == 'table' and oldest.err then return nil, {key, oldest.err} end
  while oldest and tonumber(oldest) <= now - per do
    redis.call('LPOP', key)
    oldest = redis.call('LINDEX', key, 0)
  end
  return count - redis.call('LLEN', key)
end
