-- @include "check_tenant_ring"
-- @include "expect_type"
-- @include "tenant_of"

-- checkTenantOf(prefix, lane, tenant): read phase: the lane's recorded tenant
-- (returned, or nil) and `tenant` (one an enqueue may record; nil or '' for
-- none) have rings of the right type.
local function checkTenantOf(prefix, lane, tenant)
  local recorded = tenantOf(prefix, lane)
  if recorded then checkTenantRing(prefix, recorded) end
  if tenant and tenant ~= '' and tenant ~= recorded then
    expectType(prefix .. 'tenants', 'hash')
    checkTenantRing(prefix, tenant)
  end
  return recorded
end
