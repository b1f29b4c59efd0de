-- @include "tenant_ring_key"

-- tenantOpen(Q, prefix, tenant): whether the tenant's entry belongs on the top
-- ring: a lane on its ring, and headroom under its ceiling.
-- Q needs .ceilings, .inflight.
local function tenantOpen(Q, prefix, tenant)
  if redis.call('LLEN', tenantRingKey(prefix, tenant)) == 0 then return false end
  local entry = '@' .. tenant
  local ceiling = tonumber(redis.call('HGET', Q.ceilings, entry))
  if ceiling then
    return (tonumber(redis.call('HGET', Q.inflight, entry)) or 0) < ceiling
  end
  return true
end
