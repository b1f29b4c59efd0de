-- @include "add_count"
-- @include "tenant_capped"
-- @include "tenant_join"
-- @include "tenant_of"
-- @include "wake"

-- tenantFreed(Q, prefix, lane, n): n of the lane's jobs left the active set;
-- its tenant's in-flight count drops with the lane's, and a tenant that was
-- at its ceiling may rejoin the top ring (a worker is woken then).
-- Q needs .inflight, .ceilings; .ring, .onring, .wake to rejoin (the read
-- phase called tenantCapped, and checkTenantRing when it answered true).
local function tenantFreed(Q, prefix, lane, n)
  local tenant = tenantOf(prefix, lane)
  if not tenant then return end
  local entry = '@' .. tenant
  if addCount(Q.inflight, entry, -n, 0) <= 0 then redis.call('HDEL', Q.inflight, entry) end
  if Q.ring and tenantCapped(Q, tenant) and tenantJoin(Q, prefix, tenant) then
    wake(Q, 1)
  end
end
