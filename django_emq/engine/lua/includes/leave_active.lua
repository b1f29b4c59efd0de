-- @include "lane_active_key"
-- @include "tenant_freed"

-- leaveActive(Q, prefix, id, lane): the job leaves the active set and its
-- lane's active set (whose size is the lane's in-flight count). A tenanted
-- lane's tenant count drops too, and a tenant held at its ceiling may rejoin
-- the top ring (includes/tenants.lua).
-- Q needs .active, .inflight (tenants' counts), .ceilings; .ring, .onring,
-- .wake to rejoin.
local function leaveActive(Q, prefix, id, lane)
  local laneActive = laneActiveKey(prefix, lane)
  redis.call('ZREM', Q.active, id)
  redis.call('ZREM', laneActive, id)
  tenantFreed(Q, prefix, lane, 1)  -- [tenants]
end
