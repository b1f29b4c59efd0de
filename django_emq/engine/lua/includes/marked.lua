-- @include "check"

-- marked: documented in includes/check.lua.
local function marked(marks, hash)
  return marks == nil or string.find(marks, POLICY_LETTER[hash], 1, true) ~= nil
end
