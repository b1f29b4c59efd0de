-- tenantRingKey: documented in includes/tenants.lua.
local function tenantRingKey(prefix, tenant)
  return prefix .. 't:' .. tenant .. ':ring'
end
