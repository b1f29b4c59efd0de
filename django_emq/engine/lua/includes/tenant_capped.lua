-- @include "guard"
-- @include "tenants"

-- tenantCapped(Q, tenant): whether the tenant has a ceiling (guarded: the
-- first call checks the ceilings hash's type).
local function tenantCapped(Q, tenant)
  local known = cappedMemo[tenant]
  if known == nil then
    known = guard(Q.ceilings, 'HEXISTS', Q.ceilings, '@' .. tenant) == 1
    cappedMemo[tenant] = known
  end
  return known
end
