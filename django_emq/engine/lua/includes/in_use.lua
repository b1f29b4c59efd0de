-- @include "check"
-- @include "guard"

-- inUse: documented in includes/check.lua.
local function inUse(key, count)
  local known = IN_USE[key]
  if known == nil then
    known = guard(key, count or 'HLEN', key) > 0
    IN_USE[key] = known
    TYPE_CHECKED[key] = true  -- the guarded read found the type it counts (or none)
  end
  return known
end
