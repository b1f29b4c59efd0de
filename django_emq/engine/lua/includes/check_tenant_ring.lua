-- @include "expect_type"
-- @include "tenant_ring_key"
-- @include "tenants"

-- checkTenantRing(prefix, tenant): read phase: the tenant's ring is a list
-- (or absent); checked once a script.
local function checkTenantRing(prefix, tenant)
  if ringChecked[tenant] then return end
  expectType(tenantRingKey(prefix, tenant), 'list')
  ringChecked[tenant] = true
end
