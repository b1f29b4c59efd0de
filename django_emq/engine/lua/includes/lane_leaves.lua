-- @include "prefix_of_q"
-- @include "tenant_of"
-- @include "tenant_ring_key"

-- laneLeaves(Q, lane): the lane leaves its ring from wherever it is (an LREM:
-- lane control only); a tenant whose ring it empties leaves the top ring.
-- Q needs .ring, .onring.
local function laneLeaves(Q, lane)
  if redis.call('SREM', Q.onring, lane) == 0 then return end
  local prefix = prefixOfQ(Q)
  local tenant = tenantOf(prefix, lane)
  if not tenant then
    redis.call('LREM', Q.ring, 1, lane)
    return
  end
  local ring = tenantRingKey(prefix, tenant)
  redis.call('LREM', ring, 1, lane)
  if redis.call('LLEN', ring) == 0 and redis.call('SREM', Q.onring, '@' .. tenant) == 1 then
    redis.call('LREM', Q.ring, 1, '@' .. tenant)
  end
end
