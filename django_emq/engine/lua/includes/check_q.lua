-- @include "check"
-- @include "expect_type"

-- checkQ: documented in includes/check.lua.
local function checkQ(Q, names)
  if names == nil then
    names = {}
    for name in pairs(Q) do names[#names + 1] = name end
    table.sort(names)
  end
  for _, name in ipairs(names) do expectType(Q[name], KEY_TYPES[name]) end
end
