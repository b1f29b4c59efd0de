-- @include "prefix_of_q"
-- @include "tenant_join"
-- @include "tenant_of"
-- @include "tenant_ring_key"

-- laneEnters(Q, lane): the lane (serviceable, on no ring) joins the tail of
-- its ring: its tenant's (whose entry then joins the top ring if it can), or
-- the top ring. Q needs .ring, .onring, .ceilings, .inflight.
local function laneEnters(Q, lane)
  local prefix = prefixOfQ(Q)
  redis.call('SADD', Q.onring, lane)
  local tenant = tenantOf(prefix, lane)
  if not tenant then
    redis.call('RPUSH', Q.ring, lane)
    return
  end
  redis.call('RPUSH', tenantRingKey(prefix, tenant), lane)
  tenantJoin(Q, prefix, tenant)
end
