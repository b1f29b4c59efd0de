-- isEntry: documented in includes/tenants.lua.
local function isEntry(name)
  return string.byte(name, 1) == 64 -- '@'
end
