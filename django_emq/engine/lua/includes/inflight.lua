-- @include "item_keys"
-- @include "counter"

-- leaveActive(Q, prefix, id, lane): the job leaves the active set and its
-- lane's active set, and its lane's in-flight count drops by one (the field
-- is removed at zero; a field holding garbage is recounted from the lane's
-- active set).
-- Q needs .active, .inflight.
local function leaveActive(Q, prefix, id, lane)
  local laneActive = laneActiveKey(prefix, lane)
  redis.call('ZREM', Q.active, id)
  redis.call('ZREM', laneActive, id)
  dropInflight(Q, lane, 1, laneActive)
end
