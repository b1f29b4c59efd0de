-- @include "guard"

-- laneFull(prefix, lane, pendingKey, default): the lane's max depth when its
-- pending set is at it (an enqueue would exceed it), else false. `default`
-- is the queue's max depth ('' for none), used when the lane sets none.
local function laneFull(prefix, lane, pendingKey, default)
  local key = prefix .. 'maxdepth'
  local max = tonumber(guard(key, 'HGET', key, lane) or default)
  if max and guard(pendingKey, 'ZCARD', pendingKey) >= max then return max end
  return false
end
