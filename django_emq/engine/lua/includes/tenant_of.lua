-- @include "any_tenants"
-- @include "tenants"

-- tenantOf(prefix, lane): the lane's tenant, or nil.
local function tenantOf(prefix, lane)
  if not anyTenants(prefix) then return nil end
  local known = tenantMemo[lane]
  if known == nil then
    known = redis.call('HGET', prefix .. 'tenants', lane) or false
    tenantMemo[lane] = known
  end
  return known or nil
end
