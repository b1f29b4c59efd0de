-- @include "item_keys"

-- leaveActive(Q, prefix, id, lane): the job leaves the active set and its
-- lane's active set, and its lane's in-flight count drops by one (the field
-- is removed at zero).
-- Q needs .active, .inflight.
local function leaveActive(Q, prefix, id, lane)
  redis.call('ZREM', Q.active, id)
  redis.call('ZREM', laneActiveKey(prefix, lane), id)
  if redis.call('HINCRBY', Q.inflight, lane, -1) <= 0 then
    redis.call('HDEL', Q.inflight, lane)
  end
end
