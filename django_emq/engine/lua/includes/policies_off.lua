-- @include "check"
-- @include "policy_indexed"

-- policiesOff: documented in includes/check.lua.
local function policiesOff(prefix)
  if POLICIES_OFF == nil then
    POLICIES_OFF = true
    if policyIndexed(prefix) then
      local flags = POLICY_FLAGS_READ
      POLICY_FLAGS = flags
      for _, entry in ipairs(POLICY_HASHES) do
        local on = string.find(flags, entry[2], 1, true) ~= nil
        IN_USE[prefix .. entry[1]] = on
        if on then POLICIES_OFF = false end
      end
    else
      POLICIES_OFF = false  -- some policy key holds something: each is asked (inUse)
    end
  end
  return POLICIES_OFF
end
