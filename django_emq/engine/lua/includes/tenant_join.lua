-- @include "tenant_open"

-- tenantJoin(Q, prefix, tenant): the tenant's entry joins the top ring's tail
-- when it belongs there and is not there yet; returns true when it joined.
-- Q needs .ring, .onring, .ceilings, .inflight.
local function tenantJoin(Q, prefix, tenant)
  local entry = '@' .. tenant
  if redis.call('SISMEMBER', Q.onring, entry) == 1 then return false end
  if not tenantOpen(Q, prefix, tenant) then return false end
  redis.call('SADD', Q.onring, entry)
  redis.call('RPUSH', Q.ring, entry)
  return true
end
