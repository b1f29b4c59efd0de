-- @include "any_tenants"
-- @include "guard"
-- @include "lane_marks"
-- @include "marked"
-- @include "tenants"

-- tenantOf(prefix, lane): the lane's tenant, or nil. A lane whose field of the
-- policy index names no tenant (includes/check.lua) is not looked up.
local function tenantOf(prefix, lane)
  if not anyTenants(prefix) then return nil end
  local known = tenantMemo[lane]
  if known == nil then
    known = false
    if marked(laneMarks(prefix, lane), 'tenants') then
      local key = prefix .. 'tenants'
      known = guard(key, 'HGET', key, lane) or false
    end
    tenantMemo[lane] = known
  end
  return known or nil
end
