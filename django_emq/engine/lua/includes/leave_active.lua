-- @include "drop_inflight"
-- @include "lane_active_key"
-- @include "tenant_freed"

-- leaveActive(Q, prefix, id, lane): the job leaves the active set and its
-- lane's active set, and its lane's in-flight count drops by one (the field
-- is removed at zero; a field holding garbage is recounted from the lane's
-- active set). A tenanted lane's tenant count drops too, and a tenant held at
-- its ceiling may rejoin the top ring (includes/tenants.lua).
-- Q needs .active, .inflight, .ceilings; .ring, .onring, .wake to rejoin.
local function leaveActive(Q, prefix, id, lane)
  local laneActive = laneActiveKey(prefix, lane)
  redis.call('ZREM', Q.active, id)
  redis.call('ZREM', laneActive, id)
  dropInflight(Q, lane, 1, laneActive)
  tenantFreed(Q, prefix, lane, 1)  -- [tenants]
end
