-- @include "in_use"
-- @include "tenants"

-- anyTenants(prefix): whether any lane of the queue has a tenant. The first
-- call reads the tenants hash (guarded): make it in the read phase.
local function anyTenants(prefix)
  if tenantsSeen == nil then
    tenantsSeen = inUse(prefix .. 'tenants')
  end
  return tenantsSeen
end
