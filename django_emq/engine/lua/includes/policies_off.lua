-- @include "check"
-- @include "guard"

-- policiesOff: documented in includes/check.lua.
local function policiesOff(prefix)
  if POLICIES_OFF == nil then
    local index = prefix .. 'policies'
    local flags = guard(index, 'HGET', index, '*') or ''
    TYPE_CHECKED[index] = true
    POLICY_FLAGS = flags
    POLICIES_OFF = true
    for _, entry in ipairs(POLICY_HASHES) do
      local on = string.find(flags, entry[2], 1, true) ~= nil
      IN_USE[prefix .. entry[1]] = on
      if on then POLICIES_OFF = false end
    end
  end
  return POLICIES_OFF
end
