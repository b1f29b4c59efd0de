-- @include "tenant_join"
-- @include "tenant_open"

-- tenantRefresh(Q, prefix, tenant): the entry's place on the top ring matches
-- tenantOpen, either way (leaving costs an LREM over the top ring: lane
-- control only). Q needs .ring, .onring, .ceilings, .inflight.
local function tenantRefresh(Q, prefix, tenant)
  if tenantOpen(Q, prefix, tenant) then return tenantJoin(Q, prefix, tenant) end
  local entry = '@' .. tenant
  if redis.call('SREM', Q.onring, entry) == 1 then redis.call('LREM', Q.ring, 1, entry) end
  return false
end
